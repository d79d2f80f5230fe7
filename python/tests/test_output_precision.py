"""--output-precision low (memopt.compile(output_precision='low')): with --precision fp16|bf16 the
outputs the model computes in the low type are returned in it, as PyTorch's autocast returns
them, instead of being cast up to float32 (docs/mixed-precision.md, "Outputs stored in f32").

A small decoder (token and position embeddings, a causal single-head attention, an MLP, layer
norms, the tied LM head) built with onnx.helper has two outputs: `logits`, computed in the low
type, and `lse` (log-sum-exp of the logits), computed in an f32 island (exp, sum, log), which
stays float32. Each is compiled for the host with and without the option and checked:

- dtypes: the executable writes f16 logits as '<f2' .npy; bf16 ones as float32 .npy (NumPy has
  no bfloat16: the runtime's convention for bf16 inputs and outputs, lib/Runtime/Main.cpp) whose
  values are bfloat16 numbers; memopt.Program.run returns float16 / ml_dtypes.bfloat16 arrays;
  `lse` is float32 everywhere;
- values: the low logits are the float32 logits of the default compilation exactly (those are a
  cast of the same low tensor, which the island reads too), and both match onnxruntime in
  float32 within test_mixed_precision.py's tolerance (20 unit roundoffs of the low type);
- memory, from the plans' reports: the outputs' bytes shrink by exactly the logits' elements
  times 2 (4 -> 2 bytes each), and the arena by at least that (the outputs are planned in it,
  and the logits are the largest tensor, as a language model's are).
"""

import json
import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import test_e2e_host as e2e

UNIT_ROUNDOFF = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
TOLERANCE = {precision: 20 * u for precision, u in UNIT_ROUNDOFF.items()}
PRECISIONS = sorted(UNIT_ROUNDOFF)
LOW_TYPE = {"fp16": "f16", "bf16": "bf16"}

BATCH, SEQ, DIM, VOCAB = 2, 8, 32, 512


def decoder_model(seed=0):
    """ids [B, S] int64 -> logits [B, S, V] and lse [B, S, 1] (float32 in the ONNX model)."""
    rng = np.random.default_rng(seed)

    def weight(name, shape, scale=0.2):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)

    def constant(name, value):
        return numpy_helper.from_array(np.asarray(value), name)

    mask = np.triu(np.full((SEQ, SEQ), -1e4, np.float32), k=1)
    initializers = [
        weight("wte", (VOCAB, DIM)), weight("wpe", (SEQ, DIM)),
        constant("ln1_scale", np.ones(DIM, np.float32)), constant("ln1_bias", np.zeros(DIM, np.float32)),
        weight("wq", (DIM, DIM)), weight("wk", (DIM, DIM)), weight("wv", (DIM, DIM)),
        weight("wo", (DIM, DIM)),
        constant("scale", np.array(1.0 / np.sqrt(DIM), np.float32)),
        constant("mask", mask),
        constant("ln2_scale", np.ones(DIM, np.float32)), constant("ln2_bias", np.zeros(DIM, np.float32)),
        weight("w1", (DIM, 4 * DIM)), weight("b1", (4 * DIM,)), weight("w2", (4 * DIM, DIM)),
        constant("lnf_scale", np.ones(DIM, np.float32)), constant("lnf_bias", np.zeros(DIM, np.float32)),
        constant("axes", np.array([-1], np.int64)),
    ]
    node = helper.make_node
    nodes = [
        node("Gather", ["wte", "ids"], ["tok"], name="wte_gather"),
        node("Add", ["tok", "wpe"], ["h0"], name="add_pos"),
        node("LayerNormalization", ["h0", "ln1_scale", "ln1_bias"], ["a0"], name="ln1", axis=-1),
        node("MatMul", ["a0", "wq"], ["q"], name="q"),
        node("MatMul", ["a0", "wk"], ["k"], name="k"),
        node("MatMul", ["a0", "wv"], ["v"], name="v"),
        node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
        node("MatMul", ["q", "kt"], ["s0"], name="scores"),
        node("Mul", ["s0", "scale"], ["s1"], name="scaled"),
        node("Add", ["s1", "mask"], ["s2"], name="masked"),
        node("Softmax", ["s2"], ["p"], name="softmax", axis=-1),
        node("MatMul", ["p", "v"], ["ctx"], name="context"),
        node("MatMul", ["ctx", "wo"], ["attn"], name="proj"),
        node("Add", ["h0", "attn"], ["h1"], name="residual1"),
        node("LayerNormalization", ["h1", "ln2_scale", "ln2_bias"], ["a1"], name="ln2", axis=-1),
        node("MatMul", ["a1", "w1"], ["m0"], name="fc1"),
        node("Add", ["m0", "b1"], ["m1"], name="fc1_bias"),
        node("Relu", ["m1"], ["m2"], name="relu"),
        node("MatMul", ["m2", "w2"], ["m3"], name="fc2"),
        node("Add", ["h1", "m3"], ["h2"], name="residual2"),
        node("LayerNormalization", ["h2", "lnf_scale", "lnf_bias"], ["hf"], name="lnf", axis=-1),
        node("Transpose", ["wte"], ["head"], name="tied_head", perm=[1, 0]),
        node("MatMul", ["hf", "head"], ["logits"], name="lm_head"),
        # An f32 island (exp, sum, log): its output stays float32 with output_precision low.
        node("Exp", ["logits"], ["e"], name="exp"),
        node("ReduceSum", ["e", "axes"], ["se"], name="sum", keepdims=1),
        node("Log", ["se"], ["lse"], name="log"),
    ]
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, [BATCH, SEQ])]
    outputs = [e2e._f32("logits", [BATCH, SEQ, VOCAB]), e2e._f32("lse", [BATCH, SEQ, 1])]
    return e2e._model(nodes, inputs, outputs, initializers)


def token_ids(seed=1):
    return np.random.default_rng(seed).integers(0, VOCAB, size=(BATCH, SEQ), dtype=np.int64)


def relative_error(got, reference):
    scale = float(np.max(np.abs(reference)))
    assert scale > 0
    return float(np.max(np.abs(got.astype(np.float64) - reference))) / scale


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("decoder")
    path = str(folder / "decoder.onnx")
    e2e.onnx.save(decoder_model(), path)
    session = e2e.ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ids = token_ids()
    logits, lse = session.run(["logits", "lse"], {"ids": ids})
    return path, ids, {"logits": logits, "lse": lse}


def compile_and_run(compiler, path, ids, folder, precision, *flags, names=("logits", "lse")):
    """Builds the host executable, runs it; returns ({output: array}, the report)."""
    os.makedirs(folder, exist_ok=True)
    exe = os.path.join(folder, "model")
    report = os.path.join(folder, "memory.json")
    e2e.compile_model(compiler, path, exe, "--quiet", "--precision", precision, "--report",
                      report, *flags)
    e2e.run_executable(exe, {"ids": ids}, folder)
    outputs = {name: np.load(os.path.join(folder, e2e.file_name(name)))
               for name in names}
    return outputs, json.load(open(report))


@pytest.mark.parametrize("precision", PRECISIONS)
def test_low_outputs_on_the_host(precision, decoder, tmp_path):
    path, ids, expected = decoder
    compiler = e2e._tool("memopt-compile")
    kept, kept_report = compile_and_run(compiler, path, ids, str(tmp_path / "f32"), precision)
    low, low_report = compile_and_run(compiler, path, ids, str(tmp_path / "low"), precision,
                                      "--output-precision", "low")
    assert kept_report["precision"] == low_report["precision"] == LOW_TYPE[precision]

    # Types: f16 as '<f2'; bf16 as float32 .npy holding bfloat16 values; the island stays f32.
    assert kept["logits"].dtype == np.float32
    logits = low["logits"]
    if precision == "fp16":
        assert logits.dtype == np.float16
    else:
        assert logits.dtype == np.float32
        assert not np.any(logits.view(np.uint32) & 0xFFFF), "bf16 values written as float32"
    assert low["lse"].dtype == kept["lse"].dtype == np.float32

    # Values: the same low logits, only not cast up; both near onnxruntime's f32 result.
    np.testing.assert_array_equal(logits.astype(np.float32), kept["logits"])
    np.testing.assert_array_equal(low["lse"], kept["lse"])
    for name in ("logits", "lse"):
        error = relative_error(low[name], expected[name])
        assert error < TOLERANCE[precision], (
            f"{precision} {name}: relative error {error:.3g} "
            f"({error / UNIT_ROUNDOFF[precision]:.1f} unit roundoffs)")

    # Memory: the logits' f32 bytes become low bytes, in the outputs and in the arena.
    saved = expected["logits"].size * (4 - 2)
    assert low_report["output_bytes"] == kept_report["output_bytes"] - saved
    assert low_report["io_bytes"] == kept_report["io_bytes"] - saved
    assert low_report["arena_bytes"] <= kept_report["arena_bytes"] - saved, (
        low_report["arena_bytes"], kept_report["arena_bytes"], saved)
    assert low_report["weights_bytes"] == kept_report["weights_bytes"]


def test_the_head_alone_halves_its_output(decoder, tmp_path):
    """Without the island the default stores the head's f32 accumulator into the output (no
    low copy); low stores the f16 product instead: the output and the arena shrink by the
    logits' f16 bytes, and the values are those accumulators rounded to f16."""
    import onnx
    path, ids, expected = decoder
    model = onnx.load(path)
    del model.graph.output[1]
    for _ in range(3):
        model.graph.node.pop()
    head_only = str(tmp_path / "head.onnx")
    onnx.save(model, head_only)
    compiler = e2e._tool("memopt-compile")
    kept, kept_report = compile_and_run(compiler, head_only, ids, str(tmp_path / "f32"), "fp16",
                                        names=["logits"])
    low, low_report = compile_and_run(compiler, head_only, ids, str(tmp_path / "low"), "fp16",
                                      "--output-precision", "low", names=["logits"])
    assert low["logits"].dtype == np.float16 and kept["logits"].dtype == np.float32
    # Rounded once (the host kernel accumulates in double): within half an f16 ulp of the
    # f32 accumulator, not always its f16 rounding (a double rounding may differ).
    np.testing.assert_allclose(low["logits"].astype(np.float32), kept["logits"],
                               rtol=2.0 ** -10, atol=2.0 ** -24)
    saved = expected["logits"].size * (4 - 2)
    assert low_report["output_bytes"] == kept_report["output_bytes"] - saved
    assert low_report["arena_bytes"] <= kept_report["arena_bytes"] - saved


@pytest.fixture(scope="module")
def memopt(memopt_package):
    return memopt_package


@pytest.mark.parametrize("precision", PRECISIONS)
def test_python_returns_low_arrays(precision, memopt, decoder):
    path, ids, expected = decoder
    program = memopt.compile(path, precision=precision, output_precision="low")
    outputs = program.run({"ids": ids})
    logits = outputs["logits"]
    assert logits.dtype.name == {"fp16": "float16", "bf16": "bfloat16"}[precision]
    assert outputs["lse"].dtype == np.float32
    assert {o.name: o.dtype for o in program.outputs}["logits"] == logits.dtype.name
    assert program.report["output_bytes"] == logits.nbytes + outputs["lse"].nbytes
    for name, value in outputs.items():
        error = relative_error(value.astype(np.float32), expected[name])
        assert error < TOLERANCE[precision], (precision, name, error)
    # A caller's buffer of the low type is filled in place.
    given = np.zeros_like(logits)
    again = program.run({"ids": ids}, outputs={"logits": given})
    assert again["logits"] is given
    np.testing.assert_array_equal(given.astype(np.float32), logits.astype(np.float32))


def test_python_option_errors(memopt, decoder):
    path = decoder[0]
    with pytest.raises(memopt.CompileError, match="output-precision low needs precision fp16"):
        memopt.compile(path, output_precision="low")
    with pytest.raises(memopt.CompileError, match="output-precision 'f16' is not f32 or low"):
        memopt.compile(path, precision="fp16", output_precision="f16")


def test_python_bfloat16_arrays_in_and_out(memopt):
    """NumPy's bfloat16 (ml_dtypes) exports neither DLPack nor a buffer: memopt.Program hands
    such arrays to the extension as their uint16 bits, for inputs and outputs alike."""
    import ml_dtypes
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [4])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    program = memopt.compile(model)
    x = np.array([-1.5, 2.25, -0.5, 3.0], ml_dtypes.bfloat16)
    y = program.run({"x": x})["y"]
    assert y.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y.astype(np.float32), [0, 2.25, 0, 3])
    # A list becomes an array of the program's dtype, bfloat16 too.
    listed = program.run({"x": [1.0, -2.0, 3.5, -4.0]})["y"]
    np.testing.assert_array_equal(listed.astype(np.float32), [1, 0, 3.5, 0])
