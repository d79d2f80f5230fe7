"""Channels-last programs (memopt-compile --layout, the memopt-layout pass) on the host backend.

The layout is a property of the tensor, not of the backend: a program whose convolution regions
run channels-last (NHWC tensors, KRSC filters, transposes only at region borders) runs on the host
as well, and must match onnxruntime as the NCHW program does. `--layout nhwc` forces every
convolution channels-last, so the host checks the exact program that `--layout auto` gives the
CUDA target in f16 (auto itself leaves the host NCHW: its kernels are channels-first).

Tolerances: f32 1e-4 relative to the output's largest magnitude (test_e2e_host's); f16 the
mixed-precision bound, 20 unit roundoffs (9.8e-3, test_mixed_precision.py).

Covered: a generated model with every op that follows the layout (conv with groups, dilation and
stride; batch norm; max / average / global average pooling; a residual add that becomes
conv_residual; a squeeze-excitation gate broadcast over the feature map; a channel concat; a
nearest resize; ReduceMean with and without keepdims) and four zoo models (dynamo ResNet-50,
MobileNetV3-large, EfficientNet-B0, ConvNeXt-T: residual convs, depthwise convs, SE gates, the
exporter's own NHWC permutes around LayerNorm), each compiled NCHW and NHWC.
"""

import os
import re

import numpy as np
import pytest
from onnx import helper

import fill_weights
import test_e2e_host as e2e
import zoo
import tiers


def _layout_model(rng, group=2):
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="stem", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c1", "s", "bb", "mean", "var"], ["bn"],
                         name="bn", epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="maxpool", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="grouped",
                         kernel_shape=[3, 3], pads=[2, 2, 2, 2], dilations=[2, 2], group=group),
        helper.make_node("Add", ["c2", "p1"], ["a"], name="residual"),
        helper.make_node("Relu", ["a"], ["r2"], name="relu2"),
        # Squeeze-excitation: mean over H, W -> 1x1 conv -> hard sigmoid -> scale.
        helper.make_node("ReduceMean", ["r2"], ["m"], name="squeeze", axes=[2, 3],
                         keepdims=1),
        helper.make_node("Conv", ["m", "w3"], ["e"], name="excite", kernel_shape=[1, 1]),
        helper.make_node("HardSigmoid", ["e"], ["gate"], name="gate"),
        helper.make_node("Mul", ["r2", "gate"], ["se"], name="scale"),
        helper.make_node("Conv", ["se", "w4"], ["c4"], name="branch", kernel_shape=[1, 1]),
        helper.make_node("Concat", ["se", "c4"], ["cat"], name="concat", axis=1),
        helper.make_node("AveragePool", ["cat"], ["ap"], name="avgpool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Resize", ["ap", "", "scales"], ["up"], name="resize",
                         mode="nearest"),
        helper.make_node("GlobalAveragePool", ["up"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["y"], name="flatten"),
        helper.make_node("ReduceMean", ["cat"], ["y2"], name="mean_hw", axes=[2, 3],
                         keepdims=0),
    ]
    inits = [e2e._w(rng, "w1", [8, 3, 3, 3]), e2e._w(rng, "b1", [8]),
             e2e._w(rng, "s", [8], True), e2e._w(rng, "bb", [8]), e2e._w(rng, "mean", [8]),
             e2e._w(rng, "var", [8], True), e2e._w(rng, "w2", [8, 8 // group, 3, 3]),
             e2e._w(rng, "b2", [8]), e2e._w(rng, "w3", [8, 8, 1, 1]),
             e2e._w(rng, "w4", [8, 8, 1, 1]),
             e2e.numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    return e2e._model(nodes, [e2e._f32("x", [2, 3, 16, 16])],
                      [e2e._f32("y", [2, 16]), e2e._f32("y2", [2, 16]),
                       e2e._f32("up", [2, 16, 8, 8])], inits)


def _compile_and_compare(compiler, onnx_path, folder, shapes, flags, tolerance, values=None):
    """Compiles for the host with `flags`, runs, compares with onnxruntime (float32); returns
    the largest relative error."""
    session, inputs = e2e.random_inputs(onnx_path, shapes)
    for name, make in (values or {}).items():
        inputs[name] = make(inputs[name].shape).astype(inputs[name].dtype)
    expected = session.run(None, inputs)
    names = [o.name for o in session.get_outputs()]
    os.makedirs(folder, exist_ok=True)
    exe = os.path.join(folder, "model")
    shape_args = []
    for name, shape in shapes.items():
        shape_args += ["--input-shape", f"{name}={'x'.join(str(d) for d in shape)}"]
    e2e.compile_model(compiler, onnx_path, exe, "--quiet", *shape_args, *flags)
    e2e.run_executable(exe, inputs, folder)
    worst = 0.0
    for name, reference in zip(names, expected):
        got = np.load(os.path.join(folder, e2e.file_name(name)))
        assert got.shape == reference.shape, (name, got.shape, reference.shape)
        scale = float(np.max(np.abs(reference)))
        assert scale > 0, f"{name}: the reference output is all zeros"
        error = float(np.max(np.abs(got.astype(np.float64) - reference))) / scale
        assert error < tolerance, f"{flags} output {name}: relative error {error:.3g}"
        worst = max(worst, error)
    return worst


def _graph_ir(compiler, onnx_path, out, shapes, *flags):
    argv = [compiler, onnx_path, "--emit", "mlir", "-o", out, "--quiet", *flags]
    for name, shape in shapes.items():
        argv += ["--input-shape", f"{name}={'x'.join(str(d) for d in shape)}"]
    proc = e2e._run(argv)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return open(out).read()


@pytest.fixture(scope="module")
def compiler():
    return e2e._tool("memopt-compile")


@pytest.mark.parametrize("precision,tolerance", [("fp32", e2e.RELATIVE_TOLERANCE),
                                                 ("fp16", 20 * 2.0 ** -11)])
def test_generated_model_follows_the_layout(precision, tolerance, compiler, tmp_path):
    path = str(tmp_path / "layout.onnx")
    e2e.onnx.save(_layout_model(np.random.default_rng(7)), path)
    for layout in ("nchw", "nhwc"):
        _compile_and_compare(compiler, path, str(tmp_path / layout), {},
                             ["--precision", precision, "--layout", layout], tolerance)
    ir = _graph_ir(compiler, path, str(tmp_path / "nhwc.mlir"), {}, "--precision", precision,
                   "--layout", "nhwc")
    assert 'memopt.layout = "nhwc"' in ir
    # Every op of the region follows: 4 convolutions (one with the residual), the pools, the
    # batch norm; the only layout transposes are the input's and the NCHW output `up`'s (`y`
    # and `y2` are reached through a reshape and a reduction).
    assert len(re.findall(r"memopt\.(conv|conv_residual) .*channels_last", ir)) == 4, ir
    assert "memopt.conv_residual" in ir
    for op in ("max_pool", "average_pool", "global_average_pool", "batch_normalization"):
        assert re.search(rf"memopt\.{op} .*channels_last", ir), op
    assert re.search(r"memopt\.concat .*axis = 3", ir)
    assert len(re.findall(r"memopt\.transpose ", ir)) == 2, ir


def test_auto_layout_follows_the_target_and_precision(compiler, tmp_path):
    """auto: channels-last for f16 / bf16 / TF32 on CUDA unless a convolution is grouped but
    not depthwise (group 2 of 8 channels; group 8 is depthwise: memopt's channels-last kernel
    or cuDNN's, the runtime measures); the CUDA source says so in its conv params."""
    paths = {}
    for group in (1, 2, 8):
        paths[group] = str(tmp_path / f"layout_g{group}.onnx")
        e2e.onnx.save(_layout_model(np.random.default_rng(7), group), paths[group])
    cases = {("cuda", "fp16", 1): True, ("cuda", "bf16", 1): True, ("cuda", "tf32", 1): True,
             ("cuda", "fp32", 1): False, ("host", "fp16", 1): False,
             ("cuda", "fp16", 2): False, ("cuda", "tf32", 2): False,
             ("cuda", "fp16", 8): True, ("cuda", "bf16", 8): True, ("cuda", "tf32", 8): True,
             ("cuda", "fp32", 8): False, ("host", "fp16", 8): False}
    for (target, precision, group), channels_last in cases.items():
        out = str(tmp_path / f"{target}_{precision}_{group}")
        proc = e2e._run([compiler, paths[group], "-o", out, "--target", target, "--emit",
                         "source", "--precision", precision, "--quiet"])
        assert proc.returncode == 0, proc.stderr[-3000:]
        source = open(out + (".cu" if target == "cuda" else ".cpp")).read()
        assert ("params.channelsLast = true;" in source) == channels_last, (
            target, precision, group)
    proc = e2e._run([compiler, paths[1], "-o", str(tmp_path / "bad"), "--layout", "hwc"])
    assert proc.returncode != 0 and "--layout 'hwc' is not auto, nchw or nhwc" in proc.stderr


ZOO_LAYOUT = ["dynamo/resnet50", "dynamo/mobilenet_v3_large", "dynamo/efficientnet_b0",
              "dynamo/convnext_tiny"]


@pytest.mark.parametrize("model_id", tiers.params(ZOO_LAYOUT, tiers.ZOO_LAYOUT))
def test_zoo_channels_last_matches_onnxruntime(model_id, compiler, tmp_path):
    model = zoo.by_id(model_id)
    onnx_path = fill_weights.fill(model.path, str(tmp_path / "model"), log=open(os.devnull, "w"))
    shapes = {name: shape for name, (shape, _) in model.inputs.items()}
    _compile_and_compare(compiler, onnx_path, str(tmp_path / "nhwc"), shapes,
                         ["--layout", "nhwc"], e2e.RELATIVE_TOLERANCE, model.values)
    ir = _graph_ir(compiler, onnx_path, str(tmp_path / "nhwc.mlir"), shapes, "--layout", "nhwc")
    # One transpose left: the network input's (the head reaches the classifier through
    # reshapes, ConvNeXt's own permutes cancel).
    assert len(re.findall(r"memopt\.transpose ", ir)) == 1, model_id
    if model_id == "dynamo/mobilenet_v3_large":
        _compile_and_compare(compiler, onnx_path, str(tmp_path / "nhwc16"), shapes,
                             ["--layout", "nhwc", "--precision", "fp16"], 20 * 2.0 ** -11,
                             model.values)
