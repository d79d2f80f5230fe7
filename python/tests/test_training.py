"""Training steps (memopt-compile --train) on the host backend.

- loss and every parameter gradient against onnxruntime-training (the gradient oracle,
  python/tools/ort_training_oracle.py, in its own environment) on every model of the
  foundation set at batch 1, and on small generated models;
- weights after 3 steps of SGD with momentum and of AdamW against PyTorch's update formulas
  applied to the oracle's gradients;
- a real learning task: the digits data set of scikit-learn to >= 95% held-out accuracy, the
  saved ONNX model checked by onnxruntime;
- bad input: a clear message, a non-zero exit, nothing written.

The executable writes every parameter and its optimizer state with --save-state; after one
SGD step with momentum the momentum buffer is exactly the gradient, so gradients are compared
without rounding through an update.
"""

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "models"))
import zoo  # noqa: E402
from fill_weights import fill  # noqa: E402

REPO = zoo.REPO
BUILD_DIR = os.environ.get("MEMOPT_BUILD_DIR", os.path.join(REPO, "build"))
COMPILE = os.path.join(BUILD_DIR, "bin", "memopt-compile")
ORACLE_PYTHON = os.path.join(BUILD_DIR, "ort-training-venv", "bin", "python")
ORACLE = os.path.join(REPO, "python", "tools", "ort_training_oracle.py")

GRADIENT_TOLERANCE = 1e-4  # relative L2, fp32 against fp32
# With batch statistics, each BatchNormalization's backward subtracts two means from the
# incoming gradient; over 50 layers (ResNet-50 at batch 1) fp32 programs that order those
# sums differently drift apart to ~7e-4 (measured: dynamo ResNet-50 6.7e-4, MobileNetV3
# 1.7e-4, the bundled convnet 3e-6).
BATCH_STATISTICS_TOLERANCE = 1e-3
# Measured drift of whole deep models against the oracle where 1e-4 does not hold (both fp32;
# dynamo ResNet-50: 6.7e-4 on conv1.weight, the gradient furthest from the loss).
MODEL_TOLERANCE = {"dynamo/resnet50": 1e-3}


def run(argv, check=True, timeout=600):
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} failed ({result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


def compile_train(model, out, *args):
    run([COMPILE, model, "--train", "-o", out, "--quiet", *args])
    return str(out)


def file_name(name):
    """The executable's file name for a tensor (Main.cpp: fileNameFor)."""
    return "".join("_" if c in "/\\: " else c for c in name) + ".npy"


def trained_names(model, out):
    """Initializers memopt trains: those its --save template left out."""
    source = {t.name for t in onnx.load(model, load_external_data=False).graph.initializer}
    kept = {t.name for t in onnx.load(f"{out}.onnx-template",
                                      load_external_data=False).graph.initializer}
    return sorted(source - kept)


def oracle(model, loss, inputs, labels, folder, trainable, output=None):
    argv = [ORACLE_PYTHON, ORACLE, model, "--loss", loss, "--labels", labels, "--out", folder,
            "--trainable", ",".join(trainable)]
    for name, path in inputs.items():
        argv += ["--input", f"{name}={path}"]
    if output:
        argv += ["--output", output]
    run(argv)
    grads = {name: np.load(os.path.join(folder, "grad", name + ".npy")) for name in trainable}
    return float(np.load(os.path.join(folder, "loss.npy"))), grads


def relative_error(actual, expected, floor=1e-30):
    """Relative L2 error; `floor` bounds the denominator from below."""
    return float(np.linalg.norm(actual.astype(np.float64) - expected) /
                 max(np.linalg.norm(expected.astype(np.float64)), floor))


def gradient_errors(state, grads):
    """Relative errors of memopt's gradients (momentum buffers in `state`). A gradient that
    is zero in exact arithmetic (the bias of a convolution followed by batch normalization in
    training mode) is rounding noise on both sides: it is measured against 1e-4 of the
    model's largest gradient instead of its own size."""
    floor = 1e-4 * max(np.linalg.norm(g.astype(np.float64)) for g in grads.values())
    errors = {}
    for name, expected in grads.items():
        actual = np.load(state / file_name(name + ".momentum_buffer"))
        assert actual.shape == expected.shape, name
        errors[name] = relative_error(actual, expected, floor)
    return errors


def step_losses(stdout):
    return [float(line.split()[-1]) for line in stdout.splitlines()
            if line.startswith("step ")]


def check_gradients(tmp_path, model, loss, inputs, labels, compile_args=(), output=None,
                    tolerance=None):
    if tolerance is None:
        tolerance = (BATCH_STATISTICS_TOLERANCE if "--bn-batch-stats" in compile_args
                     else GRADIENT_TOLERANCE)
    """One memopt step against the oracle: loss and every gradient."""
    out = compile_train(model, tmp_path / "step", "--optimizer", "sgd", "--momentum", "0.9",
                        "--lr", "0", *compile_args)
    state = tmp_path / "state"
    argv = [out, "--steps", "1", "--save-state", state, "--input", f"labels={labels}"]
    for name, path in inputs.items():
        argv += ["--input", f"{name}={path}"]
    (memopt_loss,) = step_losses(run(argv).stdout)
    trainable = trained_names(model, out)
    assert trainable, "memopt trained nothing"
    oracle_loss, grads = oracle(model, loss, inputs, labels, tmp_path / "oracle", trainable,
                                output)
    assert memopt_loss == pytest.approx(oracle_loss, rel=1e-4, abs=1e-6)
    errors = gradient_errors(state, grads)
    worst = max(errors, key=errors.get)
    assert errors[worst] <= tolerance, (
        f"{len(errors)} gradients, worst {worst}: {errors[worst]:.3g}; "
        f"all above tolerance: {[n for n, e in errors.items() if e > tolerance]}")
    return errors


#===------------------------------------------------------------------------------------===#
# Small generated models
#===------------------------------------------------------------------------------------===#


def make_mlp(path, batch=4, features=8, hidden=16, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((hidden, features)) * 0.3)
                                .astype(np.float32), "fc1.weight"),
        numpy_helper.from_array((rng.standard_normal(hidden) * 0.1).astype(np.float32),
                                "fc1.bias"),
        numpy_helper.from_array((rng.standard_normal((classes, hidden)) * 0.3)
                                .astype(np.float32), "fc2.weight"),
        numpy_helper.from_array((rng.standard_normal(classes) * 0.1).astype(np.float32),
                                "fc2.bias"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], transB=1, name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["logits"], transB=1,
                         name="fc2"),
    ]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                     [batch, features])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def save(path, array):
    np.save(path, array)
    return str(path)


def test_mlp_cross_entropy_matches_ort_training(tmp_path):
    model = make_mlp(tmp_path / "mlp.onnx")
    rng = np.random.default_rng(1)
    x = save(tmp_path / "x.npy", rng.standard_normal((4, 8)).astype(np.float32))
    y = save(tmp_path / "y.npy", np.array([0, 2, 1, 2], np.int64))
    check_gradients(tmp_path, model, "cross-entropy", {"x": x}, y)


def test_mlp_mse_matches_ort_training(tmp_path):
    model = make_mlp(tmp_path / "mlp.onnx")
    rng = np.random.default_rng(2)
    x = save(tmp_path / "x.npy", rng.standard_normal((4, 8)).astype(np.float32))
    target = save(tmp_path / "t.npy", rng.standard_normal((4, 3)).astype(np.float32))
    out = compile_train(model, tmp_path / "step", "--loss", "mse", "--momentum", "0.9",
                        "--lr", "0")
    state = tmp_path / "state"
    (loss,) = step_losses(run([out, "--steps", "1", "--save-state", state, "--input",
                               f"x={x}", "--input", f"target={target}"]).stdout)
    oracle_loss, grads = oracle(model, "mse", {"x": x}, target, tmp_path / "oracle",
                                trained_names(model, out))
    assert loss == pytest.approx(oracle_loss, rel=1e-5)
    for name, error in gradient_errors(state, grads).items():
        assert error <= GRADIENT_TOLERANCE, name


def test_bundled_convnet_matches_ort_training(tmp_path):
    rng = np.random.default_rng(3)
    x = save(tmp_path / "x.npy", rng.standard_normal((1, 3, 32, 32)).astype(np.float32))
    y = save(tmp_path / "y.npy", np.array([4], np.int64))
    # onnxruntime-training trains BatchNormalization in training mode.
    check_gradients(tmp_path, zoo.BUNDLED_PATH, "cross-entropy", {"input": x}, y,
                    ["--bn-batch-stats"])


#===------------------------------------------------------------------------------------===#
# Several steps: SGD with momentum and AdamW against PyTorch's formulas
#===------------------------------------------------------------------------------------===#


def reference_steps(model_path, tmp_path, optimizer, steps, x, y, lr, momentum=0.9,
                    weight_decay=0.0, betas=(0.9, 0.999), eps=1e-8):
    """The weights after `steps` steps: oracle gradients at each step's weights, updated with
    torch.optim.SGD / AdamW's formulas in float64."""
    model = onnx.load(model_path)
    weights = {t.name: numpy_helper.to_array(t).astype(np.float64)
               for t in model.graph.initializer}
    state = {name: [np.zeros_like(w), np.zeros_like(w)] for name, w in weights.items()}
    for t in range(1, steps + 1):
        current = onnx.load(model_path)
        for tensor in current.graph.initializer:
            tensor.CopyFrom(numpy_helper.from_array(weights[tensor.name].astype(np.float32),
                                                    tensor.name))
        path = tmp_path / f"ref{t}.onnx"
        onnx.save(current, path)
        _, grads = oracle(str(path), "cross-entropy", {"x": x}, y, tmp_path / f"ref{t}",
                          sorted(weights))
        for name, grad in grads.items():
            g = grad.astype(np.float64)
            w = weights[name]
            if optimizer == "sgd":
                g = g + weight_decay * w
                state[name][0] = momentum * state[name][0] + g
                weights[name] = w - lr * state[name][0]
            else:
                w = w * (1 - lr * weight_decay)
                m, v = state[name]
                m = betas[0] * m + (1 - betas[0]) * g
                v = betas[1] * v + (1 - betas[1]) * g * g
                state[name] = [m, v]
                step_size = lr / (1 - betas[0] ** t)
                denom = np.sqrt(v) / np.sqrt(1 - betas[1] ** t) + eps
                weights[name] = w - step_size * m / denom
    return weights


@pytest.mark.parametrize("optimizer,args", [
    ("sgd", ["--lr", "0.1", "--momentum", "0.9", "--weight-decay", "0.01"]),
    ("adamw", ["--lr", "0.01", "--weight-decay", "0.05"]),
])
def test_three_steps_match_pytorch_update_rules(tmp_path, optimizer, args):
    model = make_mlp(tmp_path / "mlp.onnx", seed=5)
    rng = np.random.default_rng(6)
    x = save(tmp_path / "x.npy", rng.standard_normal((4, 8)).astype(np.float32))
    y = save(tmp_path / "y.npy", np.array([1, 0, 2, 1], np.int64))
    out = compile_train(model, tmp_path / "step", "--optimizer", optimizer, *args)
    state = tmp_path / "state"
    run([out, "--steps", "3", "--save-state", state, "--input", f"x={x}", "--input",
         f"labels={y}"])
    lr = float(args[1])
    decay = float(args[args.index("--weight-decay") + 1])
    expected = reference_steps(model, tmp_path, optimizer, 3, x, y, lr,
                               weight_decay=decay)
    for name, weight in expected.items():
        actual = np.load(state / file_name(name))
        assert relative_error(actual, weight) <= 1e-5, name


#===------------------------------------------------------------------------------------===#
# The foundation set
#===------------------------------------------------------------------------------------===#

# onnxruntime-training 1.19.2 fails to build the gradient graph of the dynamo Swin-T export
# (a shape merge of its attention-mask gradients aborts the builder): no oracle there.
ORACLE_FAILS = {"dynamo/swin_t"}
FOUNDATION = [pytest.param(m, marks=pytest.mark.xfail(
                  strict=True, reason="onnxruntime-training cannot differentiate this export"))
              if m.id in ORACLE_FAILS else m
              for m in zoo.MODELS if m.name in zoo.VISION + zoo.TEXT]


@pytest.mark.parametrize("model", FOUNDATION, ids=lambda m: m.id)
def test_foundation_model_gradients_match_ort_training(tmp_path, model):
    path = fill(model.path, str(tmp_path / "model"), log=open(os.devnull, "w"))
    rng = np.random.default_rng(7)
    inputs = {}
    for name, (shape, dtype) in model.inputs.items():
        if dtype == "int64":
            value = rng.integers(0, 8192, shape).astype(np.int64)
        else:
            value = rng.standard_normal(shape).astype(np.float32)
        inputs[name] = save(tmp_path / f"{name}.npy", value)
    if model.name == "bert_nn":
        # The pooled output against a regression target (mse).
        target = save(tmp_path / "target.npy", rng.standard_normal((1, 256)).astype(np.float32))
        out = compile_train(path, tmp_path / "step", "--loss", "mse", "--loss-output", "pooled",
                            "--momentum", "0.9", "--lr", "0")
        state = tmp_path / "state"
        argv = [out, "--steps", "1", "--save-state", state, "--input", f"target={target}"]
        for name, file in inputs.items():
            argv += ["--input", f"{name}={file}"]
        (loss,) = step_losses(run(argv).stdout)
        oracle_loss, grads = oracle(path, "mse", inputs, target, tmp_path / "oracle",
                                    trained_names(path, out), output="pooled")
        assert loss == pytest.approx(oracle_loss, rel=1e-4)
        errors = gradient_errors(state, grads)
        worst = max(errors, key=errors.get)
        assert errors[worst] <= GRADIENT_TOLERANCE, (worst, errors[worst])
        return
    if model.family == "vision":
        labels = rng.integers(0, 1000, (1,))
    else:
        labels = rng.integers(0, 8192, (1, 128))
    y = save(tmp_path / "labels.npy", labels.astype(np.int64))
    # onnxruntime-training runs BatchNormalization in training mode.
    has_norm = any(n.op_type == "BatchNormalization"
                   for n in onnx.load(path, load_external_data=False).graph.node)
    check_gradients(tmp_path, path, "cross-entropy", inputs, y,
                    ["--bn-batch-stats"] if has_norm else [],
                    tolerance=MODEL_TOLERANCE.get(model.id))


#===------------------------------------------------------------------------------------===#
# A learning task
#===------------------------------------------------------------------------------------===#


def test_digits_reaches_95_percent(tmp_path):
    """scikit-learn's 8x8 digits (shipped inside the package): an MLP trained by memopt
    for 300 steps of SGD with momentum; the saved ONNX model is scored by onnxruntime."""
    from sklearn.datasets import load_digits

    import onnxruntime as ort

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    split = int(0.8 * len(x))
    batch = 32
    model = make_mlp(tmp_path / "digits.onnx", batch=batch, features=64, hidden=64,
                     classes=10, seed=11)
    out = compile_train(model, tmp_path / "digits", "--optimizer", "sgd", "--lr", "0.1",
                        "--momentum", "0.9")
    xs = save(tmp_path / "x.npy", x[:split])
    ys = save(tmp_path / "y.npy", y[:split])
    trained = tmp_path / "trained.onnx"
    log = tmp_path / "loss.csv"
    result = run([out, "--input", f"x={xs}", "--input", f"labels={ys}", "--steps", "300",
                  "--save", trained, "--log", log])
    losses = step_losses(result.stdout)
    assert len(losses) == 300 and losses[-1] < losses[0] / 5
    assert log.read_text().startswith("step,loss\n")
    session = ort.InferenceSession(str(trained))
    held_out = x[split:]
    correct = 0
    for start in range(0, len(held_out) - batch + 1, batch):
        logits = session.run(None, {"x": held_out[start:start + batch]})[0]
        correct += int((logits.argmax(1) == y[split + start:split + start + batch]).sum())
    scored = (len(held_out) // batch) * batch
    assert correct / scored >= 0.95, f"accuracy {correct / scored:.3f}"


#===------------------------------------------------------------------------------------===#
# Bad input
#===------------------------------------------------------------------------------------===#


def test_non_differentiable_op_names_the_node(tmp_path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((1, 1, 4, 4)).astype(np.float32), "w")
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"], name="scale"),
             helper.make_node("Resize", ["m", "", "scales"], ["r"], mode="nearest",
                              name="upsample"),
             helper.make_node("Flatten", ["r"], ["logits"], name="flat")]
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 64])], [w, scales])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "resize.onnx"
    onnx.save(model, path)
    result = run([COMPILE, path, "--train", "-o", tmp_path / "out",
                  "--quiet"], check=False)
    assert result.returncode == 1
    assert "node 'upsample' (memopt.resize) is on the path from a trainable parameter to " \
           "the loss but has no gradient" in result.stderr
    assert not os.path.exists(tmp_path / "out")


def test_freeze_pattern_that_matches_nothing(tmp_path):
    model = make_mlp(tmp_path / "mlp.onnx")
    result = run([COMPILE, model, "--train", "--freeze", "encoder.", "-o", tmp_path / "out",
                  "--quiet"], check=False)
    assert result.returncode == 1
    assert "--freeze pattern 'encoder.' matches no float initializer" in result.stderr


def test_frozen_parameters_do_not_change(tmp_path):
    model = make_mlp(tmp_path / "mlp.onnx")
    out = compile_train(model, tmp_path / "step", "--freeze", "fc1", "--lr", "0.5")
    assert trained_names(model, out) == ["fc2.bias", "fc2.weight"]
    rng = np.random.default_rng(4)
    x = save(tmp_path / "x.npy", rng.standard_normal((4, 8)).astype(np.float32))
    y = save(tmp_path / "y.npy", np.array([0, 1, 2, 0], np.int64))
    trained = tmp_path / "trained.onnx"
    run([out, "--input", f"x={x}", "--input", f"labels={y}", "--steps", "2", "--save",
         trained])
    before = {t.name: numpy_helper.to_array(t) for t in onnx.load(model).graph.initializer}
    after = {t.name: numpy_helper.to_array(t) for t in onnx.load(trained).graph.initializer}
    np.testing.assert_array_equal(before["fc1.weight"], after["fc1.weight"])
    assert not np.array_equal(before["fc2.weight"], after["fc2.weight"])


@pytest.mark.parametrize("labels,message", [
    (np.array([0, 1, 2, 0], np.float32), "has dtype f32; the program expects i64"),
    (np.array([[0, 1, 2, 0]], np.int64), "has shape [1, 4]"),
    (np.array([0, 1, 2], np.int64), "different sample counts"),
])
def test_bad_labels(tmp_path, labels, message):
    model = make_mlp(tmp_path / "mlp.onnx")
    out = compile_train(model, tmp_path / "step")
    x = save(tmp_path / "x.npy", np.ones((4, 8), np.float32))
    y = save(tmp_path / "y.npy", labels)
    log = tmp_path / "loss.csv"
    result = run([out, "--input", f"x={x}", "--input", f"labels={y}", "--steps", "1",
                  "--log", log], check=False)
    assert result.returncode != 0
    assert message in result.stderr
    assert not log.exists()


def test_nan_loss_stops_with_the_step_number(tmp_path):
    model = make_mlp(tmp_path / "mlp.onnx")
    out = compile_train(model, tmp_path / "step", "--lr", "1e30")
    x = save(tmp_path / "x.npy", np.full((4, 8), 1e3, np.float32))
    y = save(tmp_path / "y.npy", np.array([0, 1, 2, 0], np.int64))
    trained = tmp_path / "trained.onnx"
    result = run([out, "--input", f"x={x}", "--input", f"labels={y}", "--steps", "5",
                  "--save", trained], check=False)
    assert result.returncode == 1
    assert "error: loss is" in result.stderr and "at step" in result.stderr
    assert not trained.exists()
