"""Weights converted while the weights file is written (issue 25 item 2): inference in fp16 / bf16
and the NHWC layout record a weight's cast and transpose over its mapped ONNX external data
(`#memopt.converted`, include/memopt/Dialect/MemOpt/IR/MemOptAttributes.h) instead of making a
converted copy in the compiler, and memopt-compile's weight writer converts them 16 MiB at a
time.

Each case compiles a model whose weights are ONNX external data for the host, runs it and
compares with onnxruntime in float32 within test_mixed_precision.py's tolerance (20 unit
roundoffs of the low type, relative to the largest output), then checks the weights file byte
for byte against a reference converted in numpy: every large weight's bytes, rounded to nearest
even (bf16 by the bit formula, f16 by numpy's own rounding) and, for a convolution's filter under
`--layout nhwc`, transposed to KRSC, are in the file. The printed IR holds the handles and no
converted copy.
"""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import llama_graph
import test_e2e_host as e2e
from test_mixed_precision import TOLERANCE, UNIT_ROUNDOFF


def to_bf16_bytes(values):
    """float32 -> bf16 bit patterns, round to nearest even (finite inputs); a non-zero value that
    would round to zero keeps the smallest subnormal, as the compiler's conversion does."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    tiny = ((rounded & 0x7FFF) == 0) & ((bits & 0x7FFFFFFF) != 0)
    rounded[tiny] |= 1
    return rounded.tobytes()


def to_f16_bytes(values):
    values = np.ascontiguousarray(values, np.float32)
    assert np.all(np.abs(values) < 65504), "the reference does not clamp"
    half = values.astype(np.float16).view(np.uint16).copy()
    tiny = ((half & 0x7FFF) == 0) & (values != 0)
    half[tiny] |= 1
    return half.tobytes()


CONVERT = {"bf16": to_bf16_bytes, "fp16": to_f16_bytes}


def convnet_with_external_data(folder, rng):
    """Two 3x3 convolutions with biases, relu, global average pooling and a classifier; every
    weight of more than 1024 elements in weights.bin (ONNX external data)."""
    w1 = rng.normal(0, 0.2, (32, 8, 3, 3)).astype(np.float32)
    w2 = rng.normal(0, 0.1, (32, 32, 3, 3)).astype(np.float32)
    fc = rng.normal(0, 0.2, (32, 40)).astype(np.float32)
    b1 = rng.normal(0, 0.1, 32).astype(np.float32)
    b2 = rng.normal(0, 0.1, 32).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"), (fc, "fc")]]
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", **conv),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", **conv),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "fc"], ["y"], name="classifier")]
    graph = helper.make_graph(
        nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 40])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = os.path.join(folder, "convnet.onnx")
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    return path, {"w1": w1, "w2": w2, "fc": fc}


def compile_and_compare(onnx_path, folder, precision, flags=()):
    """Compiles for the host, runs, checks the outputs against onnxruntime; returns the weights
    file's bytes and the printed IR of the same compile."""
    session, inputs = e2e.random_inputs(onnx_path, {})
    expected = session.run(None, inputs)
    names = [o.name for o in session.get_outputs()]
    compiler = e2e._tool("memopt-compile")
    exe = os.path.join(folder, f"model-{precision}")
    e2e.compile_model(compiler, onnx_path, exe, "--quiet", "--precision", precision, *flags)
    e2e.run_executable(exe, inputs, folder)
    for name, reference in zip(names, expected):
        got = np.load(os.path.join(folder, e2e.file_name(name)))
        assert got.shape == reference.shape and np.all(np.isfinite(got)), name
        scale = float(np.max(np.abs(reference)))
        assert scale > 0
        error = float(np.max(np.abs(got.astype(np.float64) - reference))) / scale
        assert error < TOLERANCE[precision], (
            f"{name}: relative error {error:.3g} "
            f"({error / UNIT_ROUNDOFF[precision]:.1f} unit roundoffs)")
    mlir = os.path.join(folder, f"graph-{precision}.mlir")
    proc = e2e._run([compiler, onnx_path, "-o", mlir, "--target", "host", "--quiet",
                     "--emit", "mlir", "--precision", precision, *flags])
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(exe + ".weights", "rb") as stream:
        weights = stream.read()
    with open(mlir) as stream:
        return weights, stream.read()


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_nhwc_convnet_weights_converted_while_written(precision, tmp_path):
    path, weights = convnet_with_external_data(str(tmp_path), np.random.default_rng(3))
    data, ir = compile_and_compare(path, str(tmp_path), precision, ["--layout", "nhwc"])
    convert = CONVERT[precision]
    for name in ("w1", "w2"):  # KCRS -> KRSC, then cast
        krsc = np.transpose(weights[name], (0, 2, 3, 1))
        assert data.find(convert(krsc)) >= 0, f"{name} is not in the file as KRSC {precision}"
        assert data.find(weights[name].tobytes()) < 0, f"{name}'s f32 bytes are in the file"
    assert data.find(convert(weights["fc"])) >= 0, "the classifier is not converted"
    # The IR records each conversion over the f32 blob, and holds no converted blob.
    low = {"bf16": "bf16", "fp16": "f16"}[precision]
    assert ir.count("#memopt.converted<dense_resource<") == 3, ir[:4000]
    assert "permutation = [0, 2, 3, 1]> : tensor<32x3x3x8x" + low in ir
    assert f"_{low}:" not in ir and "_nhwc:" not in ir


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_tiny_llama_weights_converted_while_written(precision, tmp_path):
    config = llama_graph.CONFIGS["tiny"]
    graph = llama_graph.generate(config, str(tmp_path), 1, 16, "tiny")
    data, ir = compile_and_compare(graph, str(tmp_path), precision)
    model = onnx.load(graph)  # loads the external data
    matrices = 0
    for tensor in model.graph.initializer:
        values = numpy_helper.to_array(tensor)
        if values.dtype != np.float32 or values.size <= 1024:
            continue
        converted = data.find(CONVERT[precision](values)) >= 0
        # The embedding table is gathered in f32 (a gather only moves data) and may stay f32.
        assert converted or data.find(values.tobytes()) >= 0, tensor.name
        matrices += converted and values.ndim == 2
    assert matrices >= 2 * 7, "each layer's seven projections are converted"
    assert "#memopt.converted<dense_resource<" in ir


def test_bf16_conversion_holds_no_copy_of_the_weights(tmp_path):
    """A generated Llama of 86 M parameters (344 MB of fp32 external data): the bf16 inference
    compile (--emit source, the weights file written) peaks within a quarter of the bf16 weights
    above the fp32 compile of the same model. A converted copy held anywhere in the compiler (the
    172 MB the passes used to allocate) fails it."""
    from test_scale import _run_measured

    config = llama_graph.LlamaConfig(layers=2, hidden=1024, intermediate=2816, heads=16,
                                     kv_heads=4, vocab=32000)
    graph = llama_graph.generate(config, str(tmp_path), 1, 16, "llama86m")
    low_bytes = 2 * llama_graph.parameter_count(config)
    assert low_bytes > 160e6
    peaks = {}
    for precision in ("fp32", "bf16"):
        out = str(tmp_path / precision / "program")
        os.makedirs(os.path.dirname(out))
        argv = [e2e._tool("memopt-compile"), graph, "-o", out, "--target", "cuda", "--emit",
                "source", "--precision", precision, "--quiet"]
        status, log, seconds, peaks[precision] = _run_measured(
            argv, str(tmp_path / f"{precision}.log"), timeout=600)
        assert status == 0, f"exit {status} after {seconds:.0f} s:\n{log[-4000:]}"
        assert peaks[precision] > 0
    assert os.path.getsize(str(tmp_path / "bf16" / "program.weights")) > 0.99 * low_bytes
    assert peaks["bf16"] < peaks["fp32"] + low_bytes / 4, (
        f"bf16 compile peaked at {peaks['bf16'] / 2**20:.0f} MiB, the fp32 one at "
        f"{peaks['fp32'] / 2**20:.0f} MiB: {low_bytes / 2**20:.0f} MiB of bf16 weights held?")
