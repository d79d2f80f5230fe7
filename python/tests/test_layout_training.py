"""Channels-last training steps (memopt-compile --train --layout nhwc) on the host backend.

The layout pass lays out a training program after autodiff: the forward convolutions, their
data and filter gradients, batch normalization in training mode and its gradient, ReLU and
its gradient, max pooling and its gradient, the residual add and global average pooling with
its gradient run channels-last; the filters keep their ONNX layout (docs/layout.md,
"Training"). The host computes the channels-last ops through channels-first copies and sums
every batch-normalization channel in the same order, so the NHWC step must give the NCHW
step's losses and weights: within 1e-5 over several steps of SGD (momentum, weight decay) and
AdamW, f32.
"""

import os
import re
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_DIR = os.environ.get("MEMOPT_BUILD_DIR", os.path.join(REPO, "build"))
COMPILE = os.path.join(BUILD_DIR, "bin", "memopt-compile")


def run(argv):
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                            timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} failed ({result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


def make_residual_net(path, seed=0):
    """conv(3 -> 8, 3x3, bias) -> BN -> ReLU -> max pool 3x3 / 2 -> conv(8 -> 8, 3x3) -> BN
    -> + pooled -> ReLU -> conv(8 -> 8, 1x1, stride 2) -> BN -> ReLU -> global average pool ->
    flatten -> Gemm(8 -> 5): a ResNet stem and block at 2 x 3 x 12 x 12."""
    rng = np.random.default_rng(seed)

    def weight(name, shape, scale):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [weight("conv1.weight", (8, 3, 3, 3), 0.3), weight("conv1.bias", (8,), 0.1),
             weight("conv2.weight", (8, 8, 3, 3), 0.15),
             weight("conv3.weight", (8, 8, 1, 1), 0.3),
             weight("fc.weight", (5, 8), 0.4), weight("fc.bias", (5,), 0.1)]
    nodes = []
    for i in (1, 2, 3):
        inits += [numpy_helper.from_array((1 + 0.1 * rng.standard_normal(8)).astype(
                      np.float32), f"bn{i}.weight"),
                  weight(f"bn{i}.bias", (8,), 0.1),
                  numpy_helper.from_array(np.zeros(8, np.float32), f"bn{i}.running_mean"),
                  numpy_helper.from_array(np.ones(8, np.float32), f"bn{i}.running_var")]

    def bn(i, x, y):
        nodes.append(helper.make_node(
            "BatchNormalization", [x, f"bn{i}.weight", f"bn{i}.bias", f"bn{i}.running_mean",
                                   f"bn{i}.running_var"], [y], name=f"bn{i}",
            training_mode=1))

    nodes.append(helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"],
                                  name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    bn(1, "c1", "n1")
    nodes += [helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
              helper.make_node("MaxPool", ["r1"], ["p"], name="pool", kernel_shape=[3, 3],
                               strides=[2, 2], pads=[1, 1, 1, 1]),
              helper.make_node("Conv", ["p", "conv2.weight"], ["c2"], name="conv2",
                               kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    bn(2, "c2", "n2")
    nodes += [helper.make_node("Add", ["n2", "p"], ["s"], name="residual"),
              helper.make_node("Relu", ["s"], ["r2"], name="relu2"),
              helper.make_node("Conv", ["r2", "conv3.weight"], ["c3"], name="conv3",
                               kernel_shape=[1, 1], strides=[2, 2])]
    bn(3, "c3", "n3")
    nodes += [helper.make_node("Relu", ["n3"], ["r3"], name="relu3"),
              helper.make_node("GlobalAveragePool", ["r3"], ["g"], name="gap"),
              helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
              helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="fc",
                               transB=1)]
    graph = helper.make_graph(
        nodes, "residual_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 12, 12])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return str(path)


def train(model, folder, layout, optimizer_args, x, y, steps=4):
    """Losses of `steps` steps and the state after them (a dict of arrays)."""
    folder.mkdir()
    out = folder / "step"
    run([COMPILE, model, "--train", "--target", "host", "--layout", layout, "-o", out,
         "--quiet", *optimizer_args])
    state = folder / "state"
    result = run([out, "--steps", str(steps), "--save-state", state, "--input", f"x={x}",
                  "--input", f"labels={y}"])
    losses = [float(line.split()[-1]) for line in result.stdout.splitlines()
              if line.startswith("step ")]
    assert len(losses) == steps, result.stdout
    return losses, {name: np.load(state / name) for name in sorted(os.listdir(state))}


@pytest.mark.parametrize("optimizer_args", [
    ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9", "--weight-decay", "0.01"],
    ["--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.05"],
], ids=["sgd", "adamw"])
def test_channels_last_step_matches_nchw(tmp_path, optimizer_args):
    model = make_residual_net(tmp_path / "net.onnx", seed=11)
    rng = np.random.default_rng(12)
    x, y = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(x, rng.standard_normal((2, 3, 12, 12)).astype(np.float32))
    np.save(y, np.array([3, 1], np.int64))
    nchw_losses, nchw_state = train(model, tmp_path / "nchw", "nchw", optimizer_args, x, y)
    nhwc_losses, nhwc_state = train(model, tmp_path / "nhwc", "nhwc", optimizer_args, x, y)
    # The steps train: the loss moves.
    assert abs(nchw_losses[-1] - nchw_losses[0]) > 1e-3
    np.testing.assert_allclose(nhwc_losses, nchw_losses, rtol=1e-5)
    assert sorted(nhwc_state) == sorted(nchw_state)
    # Filters (and their optimizer state) keep the ONNX layout.
    assert nhwc_state["conv2.weight.npy"].shape == (8, 8, 3, 3)
    for name, expected in nchw_state.items():
        actual = nhwc_state[name]
        assert actual.shape == expected.shape, name
        scale = max(float(np.abs(expected).max()), 1e-30)
        assert float(np.abs(actual - expected).max()) <= 1e-5 * scale, name


def test_bundled_convnet_channels_last_step_matches_nchw(tmp_path):
    """The bundled convnet (six conv + BatchNormalization + ReLU, a max pool, two residual
    adds, global average pooling; its softmax head), batch statistics (--bn-batch-stats):
    three SGD steps NHWC and NCHW, losses and state (running statistics included) within
    1e-5."""
    model = os.path.join(REPO, "models", "tiny_convnet.onnx")
    rng = np.random.default_rng(31)
    x, y = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(x, rng.standard_normal((1, 3, 32, 32)).astype(np.float32))
    np.save(y, np.array([4], np.int64))
    args = ["--bn-batch-stats", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]
    input_name = onnx.load(model, load_external_data=False).graph.input[0].name
    losses, states = {}, {}
    for layout in ("nchw", "nhwc"):
        folder = tmp_path / layout
        folder.mkdir()
        out = folder / "step"
        run([COMPILE, model, "--train", "--target", "host", "--layout", layout, "-o", out,
             "--quiet", *args])
        state = folder / "state"
        result = run([out, "--steps", "3", "--save-state", state, "--input",
                      f"{input_name}={x}", "--input", f"labels={y}"])
        losses[layout] = [float(line.split()[-1]) for line in result.stdout.splitlines()
                          if line.startswith("step ")]
        states[layout] = {name: np.load(state / name) for name in os.listdir(state)}
    assert len(losses["nhwc"]) == 3
    np.testing.assert_allclose(losses["nhwc"], losses["nchw"], rtol=1e-5)
    assert sorted(states["nhwc"]) == sorted(states["nchw"])
    for name, expected in states["nchw"].items():
        scale = max(float(np.abs(expected).max()), 1e-30)
        assert float(np.abs(states["nhwc"][name] - expected).max()) <= 1e-5 * scale, name


def test_training_program_is_channels_last(tmp_path):
    """The training program after the layout pass: every convolution and its gradients
    channels-last, batch normalization (forward and backward), max pooling (forward and
    backward) and global average pooling follow; the only activation-sized transpose left
    is the network input's; each 3x3 filter is transposed once to KRSC (shared by its
    forward convolution and data gradient) and each 3x3 filter gradient once back."""
    model = make_residual_net(tmp_path / "net.onnx")
    ir = tmp_path / "step.mlir"
    run([COMPILE, model, "--train", "--target", "host", "--layout", "nhwc", "--emit", "mlir",
         "-o", ir, "--quiet"])
    text = ir.read_text()
    assert 'memopt.layout = "nhwc"' in text

    def ops(name):
        return [line for line in text.splitlines() if f"memopt.{name} " in line]

    for name, count in (("conv", 3), ("conv_transpose", 2), ("conv_backward_filter", 3),
                        ("batch_norm_training", 3), ("batch_norm_training_grad", 3),
                        ("max_pool", 1), ("pool_grad", 1), ("global_average_pool", 1)):
        found = ops(name)
        assert len(found) == count, (name, found)
        assert all("channels_last" in line for line in found), (name, found)
    transposes = [re.search(r"-> tensor<([^>]*)>", line).group(1)
                  for line in ops("transpose")]
    # A 1x1 filter's transposes only move 1s: they are reshapes (free views).
    assert sorted(t for t in transposes if t.count("x") == 4) == sorted(
        ["2x12x12x3xf32"] +                     # the input
        ["8x3x3x3xf32", "8x3x3x8xf32"] +        # 3x3 filters to KRSC
        ["8x3x3x3xf32", "8x8x3x3xf32"]), transposes  # their gradients back
