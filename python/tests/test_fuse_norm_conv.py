"""Batch norm + ReLU folded into the convolutions that read it (--fuse-norm-conv, memopt-fuse-norm-conv;
docs/layout.md, "Batch norm folded into the convolutions").

A training step where `relu(batch_norm(x))` feeds only a convolution never forms that tensor:
the convolution and its filter gradient normalize x as they load it and the normalization's
gradient recomputes the ReLU's mask from x. On the host the fused ops run the same arithmetic
through the plain kernels (the normalized input is written into the op's workspace), so a fused
step must train like the unfused one: losses and every state tensor within 1e-5 over several
SGD and AdamW steps, channels-first and channels-last, and the saved activations shrink by the
tensors no longer formed.
"""

import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_DIR = os.environ.get("MEMOPT_BUILD_DIR", os.path.join(REPO, "build"))
COMPILE = os.path.join(BUILD_DIR, "bin", "memopt-compile")

BATCH, SIZE, WIDTH = 4, 16, 16


def run(argv):
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                            timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} failed ({result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


def save_classifier(nodes, inits, last, name, path):
    """Appends the head (global average pool, flatten, Gemm to 5 logits over `last`) and saves
    the model; fc.weight and fc.bias are among `inits`."""
    nodes = nodes + [
        helper.make_node("GlobalAveragePool", [last], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="fc",
                         transB=1)]
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return str(path)


def make_bottleneck_net(path, seed=0, conv_bias=True):
    """conv(3 -> W, 3x3) -> BN -> ReLU -> conv(W -> W, 3x3, bias) -> BN -> ReLU -> conv(W -> W, 1x1,
    stride 2) -> BN -> ReLU -> global average pool -> Gemm(W -> 5): the first two
    normalizations feed only a convolution (fused), the third the pool (kept)."""
    rng = np.random.default_rng(seed)

    def weight(name, shape, scale):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [weight("conv1.weight", (WIDTH, 3, 3, 3), 0.3),
             weight("conv2.weight", (WIDTH, WIDTH, 3, 3), 0.1),
             # An exporter-style bias before the next normalization, trained: it rides
             # along in the fused convolution.
             *([weight("conv2.bias", (WIDTH,), 0.1)] if conv_bias else []),
             weight("conv3.weight", (WIDTH, WIDTH, 1, 1), 0.3),
             weight("fc.weight", (5, WIDTH), 0.4), weight("fc.bias", (5,), 0.1)]
    nodes = []
    for i in (1, 2, 3):
        inits += [numpy_helper.from_array((1 + 0.1 * rng.standard_normal(WIDTH)).astype(
                      np.float32), f"bn{i}.weight"),
                  weight(f"bn{i}.bias", (WIDTH,), 0.1),
                  numpy_helper.from_array(np.zeros(WIDTH, np.float32), f"bn{i}.running_mean"),
                  numpy_helper.from_array(np.ones(WIDTH, np.float32), f"bn{i}.running_var")]
    convs = {1: dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             2: dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             3: dict(kernel_shape=[1, 1], strides=[2, 2])}
    source = "x"
    for i in (1, 2, 3):
        inputs = [source, f"conv{i}.weight"] + (["conv2.bias"] if i == 2 and conv_bias else [])
        nodes += [helper.make_node("Conv", inputs, [f"c{i}"],
                                   name=f"conv{i}", **convs[i]),
                  helper.make_node("BatchNormalization",
                                   [f"c{i}", f"bn{i}.weight", f"bn{i}.bias",
                                    f"bn{i}.running_mean", f"bn{i}.running_var"],
                                   [f"n{i}"], name=f"bn{i}", training_mode=1),
                  helper.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"relu{i}")]
        source = f"r{i}"
    return save_classifier(nodes, inits, "r3", "bottleneck_net", path)


def train(model, folder, fuse, layout, extra, x, y, steps=4):
    """Losses of `steps` steps, the state after them and the memory report."""
    folder.mkdir()
    out = folder / "step"
    run([COMPILE, model, "--train", "--target", "host", "--layout", layout,
         "--fuse-norm-conv", fuse, "--report", folder / "report.json", "-o", out, "--quiet",
         *extra])
    state = folder / "state"
    result = run([out, "--steps", str(steps), "--save-state", state, "--input", f"x={x}",
                  "--input", f"labels={y}"])
    losses = [float(line.split()[-1]) for line in result.stdout.splitlines()
              if line.startswith("step ")]
    assert len(losses) == steps, result.stdout
    with open(folder / "report.json") as stream:
        report = json.load(stream)
    source = open(str(out) + ".cpp").read()
    return losses, {name: np.load(state / name) for name in sorted(os.listdir(state))}, \
        report, source


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(7)
    x, y = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(x, rng.standard_normal((BATCH, 3, SIZE, SIZE)).astype(np.float32))
    np.save(y, np.array([3, 1, 0, 4], np.int64))
    return x, y


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("optimizer_args", [
    pytest.param(["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9", "--weight-decay",
                  "0.01"], id="sgd"),
    # AdamW's update reads the gradients the same way: the full tier only.
    pytest.param(["--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.05"],
                 id="adamw", marks=pytest.mark.sweep),
])
def test_fused_step_trains_like_the_plain_one(tmp_path, data, layout, optimizer_args):
    x, y = data
    # A bias before a batch norm has a gradient of zero up to rounding; AdamW scales that
    # noise to steps of the learning rate, which the fused and the plain step round
    # differently. So the bias is only in the SGD model.
    model = make_bottleneck_net(tmp_path / "net.onnx", seed=3,
                                conv_bias=optimizer_args[1] == "sgd")
    plain = train(model, tmp_path / "plain", "off", layout, optimizer_args, x, y)
    fused = train(model, tmp_path / "fused", "on", layout, optimizer_args, x, y)
    plain_losses, plain_state, plain_report, plain_source = plain
    fused_losses, fused_state, fused_report, fused_source = fused
    # The fused ops reach the program: two normalizations, each with its convolution, the
    # filter gradient and the normalization's gradient; the third (before the pool) stays.
    for call, count in (("batchNormStats(", 2), ("normReluConv(", 2),
                        ("normReluConvBackwardFilter(", 2), ("batchNormReluGrad(", 2),
                        ("batchNormTraining(", 1)):
        assert fused_source.count(call) == count, (call, fused_source.count(call))
    assert "normReluConv(" not in plain_source
    # The step trains, and the fused one like the plain one.
    assert plain_losses[-1] < plain_losses[0]
    np.testing.assert_allclose(fused_losses, plain_losses, rtol=1e-5, atol=1e-6)
    assert fused_state.keys() == plain_state.keys()
    for name in plain_state:
        np.testing.assert_allclose(fused_state[name], plain_state[name], rtol=1e-5,
                                   atol=1e-5, err_msg=name)
    # Two activations of BATCH x WIDTH x SIZE x SIZE f32 are no longer formed: the bytes
    # the step keeps from its forward for its backward shrink by at least one of them (the
    # fused ops' workspaces hold the normalized input for the length of one op).
    saved = BATCH * WIDTH * SIZE * SIZE * 4
    assert fused_report["max_live_bytes"] <= plain_report["max_live_bytes"] - saved, (
        fused_report["max_live_bytes"], plain_report["max_live_bytes"])


def test_bf16_fused_step_follows_the_plain_one(tmp_path, data):
    """In bf16 the fused ops round the normalized input once (x * a + b in f32, then bf16)
    where the plain step rounds the normalization's output: the same training within bf16's
    precision."""
    x, y = data
    model = make_bottleneck_net(tmp_path / "net.onnx", seed=5)
    args = ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--precision",
            "bf16"]
    plain_losses, _, _, _ = train(model, tmp_path / "plain", "off", "nhwc", args, x, y)
    fused_losses, _, _, source = train(model, tmp_path / "fused", "on", "nhwc", args, x, y)
    assert source.count("normReluConv(") == 2
    assert fused_losses[-1] < fused_losses[0]
    np.testing.assert_allclose(fused_losses, plain_losses, rtol=2e-2)


def test_auto_leaves_host_programs_alone(tmp_path, data):
    x, y = data
    model = make_bottleneck_net(tmp_path / "net.onnx")
    _, _, _, source = train(model, tmp_path / "auto", "auto", "nhwc", [], x, y, steps=1)
    assert "normReluConv(" not in source and "batchNormStats(" not in source


def test_bad_mode_is_refused(tmp_path):
    model = make_bottleneck_net(tmp_path / "net.onnx")
    result = subprocess.run([COMPILE, model, "--train", "--target", "host",
                             "--fuse-norm-conv", "sometimes", "-o", str(tmp_path / "out"),
                             "--quiet"], capture_output=True, text=True, timeout=600)
    assert result.returncode != 0
    assert "sometimes" in result.stderr and "auto, on or off" in result.stderr, result.stderr


def make_stem_net(path, seed=0):
    """ResNet's stem: conv(3 -> W, 3x3) -> BN -> ReLU -> max pool 3x3 / 2 -> conv(W -> W, 1x1)
    -> BN -> ReLU -> global average pool -> Gemm: the first normalization's output feeds the
    pool (formed again for the pool and for its gradient), the second's the average pool."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                     name)
             for name, shape, scale in (("stem.weight", (WIDTH, 3, 3, 3), 0.3),
                                        ("next.weight", (WIDTH, WIDTH, 1, 1), 0.3),
                                        ("fc.weight", (5, WIDTH), 0.4), ("fc.bias", (5,), 0.1))]
    nodes = [helper.make_node("Conv", ["x", "stem.weight"], ["c1"], name="stem",
                              kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    for i, source in ((1, "c1"), (2, "c2")):
        inits += [numpy_helper.from_array((1 + 0.1 * rng.standard_normal(WIDTH)).astype(
                      np.float32), f"bn{i}.weight"),
                  numpy_helper.from_array((0.1 * rng.standard_normal(WIDTH)).astype(
                      np.float32), f"bn{i}.bias"),
                  numpy_helper.from_array(np.zeros(WIDTH, np.float32), f"bn{i}.running_mean"),
                  numpy_helper.from_array(np.ones(WIDTH, np.float32), f"bn{i}.running_var")]
        nodes += [helper.make_node("BatchNormalization",
                                   [source, f"bn{i}.weight", f"bn{i}.bias",
                                    f"bn{i}.running_mean", f"bn{i}.running_var"],
                                   [f"n{i}"], name=f"bn{i}", training_mode=1),
                  helper.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"relu{i}")]
        if i == 1:
            nodes += [helper.make_node("MaxPool", ["r1"], ["p"], name="pool",
                                       kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                      helper.make_node("Conv", ["p", "next.weight"], ["c2"], name="next",
                                       kernel_shape=[1, 1])]
    return save_classifier(nodes, inits, "r2", "stem_net", path)


def test_a_pooled_normalization_is_formed_again_for_the_backward(tmp_path, data):
    """The stem's batch norm feeds a max pool: R is formed for the pool and again for the
    pool's gradient (norm_relu_apply), never kept between; the step trains like the plain one."""
    x, y = data
    model = make_stem_net(tmp_path / "stem.onnx", seed=9)
    args = ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9"]
    plain_losses, plain_state, plain_report, _ = train(model, tmp_path / "plain", "off",
                                                       "nhwc", args, x, y)
    fused_losses, fused_state, fused_report, source = train(model, tmp_path / "fused", "on",
                                                            "nhwc", args, x, y)
    assert source.count("normReluApply(") == 2 and source.count("batchNormStats(") == 1
    assert source.count("batchNormReluGrad(") == 1
    np.testing.assert_allclose(fused_losses, plain_losses, rtol=1e-5, atol=1e-6)
    for name in plain_state:
        np.testing.assert_allclose(fused_state[name], plain_state[name], rtol=1e-5,
                                   atol=1e-5, err_msg=name)
    # R (BATCH x WIDTH x SIZE x SIZE f32) leaves the activations saved for the backward,
    # the per-channel scale and shift that form it again join them (this small step's peak
    # is elsewhere, so its max-live does not move).
    saved = BATCH * WIDTH * SIZE * SIZE * 4 - 2 * WIDTH * 4
    assert (fused_report["training"]["saved_for_backward_bytes"] <=
            plain_report["training"]["saved_for_backward_bytes"] - saved), (
        fused_report["training"]["saved_for_backward_bytes"],
        plain_report["training"]["saved_for_backward_bytes"])


def make_residual_net(path, seed=0):
    """A ResNet-18-like step: a stem conv(3 -> W) -> BN -> ReLU, an identity basic block (conv ->
    BN -> ReLU -> conv -> BN, + the block's input, ReLU) and a downsampling one (conv stride 2
    -> BN -> ReLU -> conv -> BN, + conv 1x1 stride 2 -> BN of the block's input, ReLU), then the
    head. Each block's last normalization is `relu(BN(x) + z)`: NormAddRelu."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def weight(name, shape, scale):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name))

    def conv_bn(name, source, cin, kernel, stride=1, relu=True):
        weight(f"{name}.weight", (WIDTH, cin, kernel, kernel), 0.6 / kernel)
        inits.extend([
            numpy_helper.from_array((1 + 0.1 * rng.standard_normal(WIDTH)).astype(np.float32),
                                    f"{name}.bn.weight"),
            numpy_helper.from_array((0.1 * rng.standard_normal(WIDTH)).astype(np.float32),
                                    f"{name}.bn.bias"),
            numpy_helper.from_array(np.zeros(WIDTH, np.float32), f"{name}.bn.running_mean"),
            numpy_helper.from_array(np.ones(WIDTH, np.float32), f"{name}.bn.running_var")])
        pad = kernel // 2
        nodes.extend([
            helper.make_node("Conv", [source, f"{name}.weight"], [f"{name}.c"], name=name,
                             kernel_shape=[kernel, kernel], strides=[stride, stride],
                             pads=[pad] * 4),
            helper.make_node("BatchNormalization",
                             [f"{name}.c", f"{name}.bn.weight", f"{name}.bn.bias",
                              f"{name}.bn.running_mean", f"{name}.bn.running_var"],
                             [f"{name}.n"], name=f"{name}.bn", training_mode=1)])
        if not relu:
            return f"{name}.n"
        nodes.append(helper.make_node("Relu", [f"{name}.n"], [f"{name}.r"],
                                      name=f"{name}.relu"))
        return f"{name}.r"

    def add_relu(name, a, b):
        nodes.extend([helper.make_node("Add", [a, b], [f"{name}.sum"], name=f"{name}.add"),
                      helper.make_node("Relu", [f"{name}.sum"], [f"{name}.out"],
                                       name=f"{name}.relu")])
        return f"{name}.out"

    stem = conv_bn("stem", "x", 3, 3)
    a = conv_bn("b1.conv1", stem, WIDTH, 3)
    a = conv_bn("b1.conv2", a, WIDTH, 3, relu=False)
    block1 = add_relu("b1", a, stem)
    a = conv_bn("b2.conv1", block1, WIDTH, 3, stride=2)
    a = conv_bn("b2.conv2", a, WIDTH, 3, relu=False)
    down = conv_bn("b2.down", block1, WIDTH, 1, stride=2, relu=False)
    block2 = add_relu("b2", a, down)
    weight("fc.weight", (5, WIDTH), 0.4)
    weight("fc.bias", (5,), 0.1)
    return save_classifier(nodes, inits, block2, "residual_net", path)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_residual_normalization_fuses_the_add_and_relu(tmp_path, data, layout):
    """Each block's `relu(BN(x) + z)` becomes batchNormTrainingAdd (BN(x) never stored) and its
    gradient batchNormAddReluGrad (relu_grad's mask from the block's output, dz written as the
    gradient is reduced); the step trains like the plain one within 1e-5."""
    x, y = data
    model = make_residual_net(tmp_path / "resnet.onnx", seed=11)
    args = ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9"]
    plain_losses, plain_state, _, plain_source = train(model, tmp_path / "plain", "off",
                                                       layout, args, x, y)
    fused_losses, fused_state, _, source = train(model, tmp_path / "fused", "on", layout,
                                                 args, x, y)
    # Two residual normalizations (the downsampling block's add reads two normalizations:
    # the later one, whose residual exists before it, fuses), and their gradients.
    assert source.count("batchNormTrainingAdd(") == 2, source.count("batchNormTrainingAdd(")
    assert source.count("batchNormAddReluGrad(") == 2
    assert "batchNormTrainingAdd(" not in plain_source
    assert plain_losses[-1] < plain_losses[0]
    np.testing.assert_allclose(fused_losses, plain_losses, rtol=1e-5, atol=1e-6)
    assert fused_state.keys() == plain_state.keys()
    for name in plain_state:
        np.testing.assert_allclose(fused_state[name], plain_state[name], rtol=1e-5,
                                   atol=1e-5, err_msg=name)


def test_bf16_residual_step_follows_the_plain_one(tmp_path, data):
    """In bf16 the fused normalization rounds relu(BN(x) + z) once where the plain step rounds
    BN(x), the sum and the relu: the same training within bf16's precision."""
    x, y = data
    model = make_residual_net(tmp_path / "resnet.onnx", seed=13)
    args = ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--precision", "bf16"]
    plain_losses, _, _, _ = train(model, tmp_path / "plain", "off", "nhwc", args, x, y)
    fused_losses, _, _, source = train(model, tmp_path / "fused", "on", "nhwc", args, x, y)
    assert source.count("batchNormTrainingAdd(") == 2
    assert source.count("batchNormAddReluGrad(") == 2
    assert fused_losses[-1] < fused_losses[0]
    np.testing.assert_allclose(fused_losses, plain_losses, rtol=2e-2)
