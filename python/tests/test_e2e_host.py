"""End to end on the host backend: memopt-compile --target host builds an executable from an ONNX
model; it runs on random non-zero inputs and its outputs are compared with onnxruntime
(float32, relative error < 1e-4 of the reference's largest magnitude). Every model is compiled
twice: with memory planning (reuse, in-place) and with --no-plan (every tensor its own slot), so a
planning or aliasing mistake shows up as a numeric difference.

Covered: the bundled tiny_convnet, small generated models (onnx.helper) for each op family the
runtime implements, and every zoo model except those in ZOO_EXPECTED_FAILURES (both exporters:
resnet50, mobilenet_v3_large, efficientnet_b0, vit_b_16, swin_t, convnext_tiny, gpt2_nn,
bert_nn, and dynamo's hf_gpt2, hf_bert, hf_llama pass; those three with a left-padded
attention_mask, so their safe-softmax attentions see fully masked rows). A zoo model the runtime
cannot run yet is listed in ZOO_EXPECTED_FAILURES with the reason; xfail is strict, so it fails
the suite once it starts working (then move it out of the list).

Also: the CUDA target of the bundled model and of every zoo model is generated, compiled with nvcc
and linked (no GPU needed), from the same source as the host program.
Build folder: $MEMOPT_BUILD_DIR (see conftest.py); it must have bin/memopt-compile.
"""

import ctypes
import json
import os
import re
import shutil
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import _tool
import fill_weights
import zoo
import tiers

RELATIVE_TOLERANCE = 1e-4
OPSET = 17


@pytest.fixture(scope="session")
def compiler():
    return _tool("memopt-compile")


def _run(argv, timeout=900):
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return proc


def compile_model(compiler, onnx_path, out, *extra):
    argv = [compiler, onnx_path, "-o", out, "--target", "host", *extra]
    proc = _run(argv)
    assert proc.returncode == 0, (f"{' '.join(argv)} failed ({proc.returncode})\n"
                                  f"{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}")
    assert os.path.isfile(out) and os.path.isfile(out + ".weights")
    return proc.stdout


def random_inputs(onnx_path, shapes, seed=0):
    """Random non-zero inputs: floats of magnitude 0.5..1.5 with random signs; token ids."""
    rng = np.random.default_rng(seed)
    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    inputs = {}
    for info in session.get_inputs():
        shape = shapes.get(info.name) or [d if isinstance(d, int) else 1 for d in info.shape]
        if info.type == "tensor(int64)":
            inputs[info.name] = rng.integers(1, 100, size=shape, dtype=np.int64)
        else:
            magnitude = rng.uniform(0.5, 1.5, size=shape)
            sign = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
            inputs[info.name] = (magnitude * sign).astype(np.float32)
    return session, inputs


def file_name(name):
    return re.sub(r"[/\\: ]", "_", name) + ".npy"


def run_executable(exe, inputs, folder):
    argv = [exe, "--weights", exe + ".weights", "--output-dir", folder]
    for name, value in inputs.items():
        path = os.path.join(folder, "in_" + file_name(name))
        np.save(path, value)
        argv += ["--input", f"{name}={path}"]
    proc = _run(argv)
    assert proc.returncode == 0, f"{exe} failed ({proc.returncode}):\n{proc.stderr[-4000:]}"


def check_against_onnxruntime(compiler, onnx_path, folder, shapes=None, extra=(), values=None):
    """Compiles with and without planning, runs both, compares both with onnxruntime.
    `values` maps input names to functions of the shape that give their value (else random)."""
    shapes = shapes or {}
    session, inputs = random_inputs(onnx_path, shapes)
    for name, make in (values or {}).items():
        inputs[name] = make(inputs[name].shape).astype(inputs[name].dtype)
    expected = session.run(None, inputs)
    names = [o.name for o in session.get_outputs()]
    shape_args = []
    for name, shape in shapes.items():
        shape_args += ["--input-shape", f"{name}={'x'.join(str(d) for d in shape)}"]
    for variant, flags in (("planned", []), ("noplan", ["--no-plan"])):
        out_dir = os.path.join(folder, variant)
        os.makedirs(out_dir, exist_ok=True)
        exe = os.path.join(out_dir, "model")
        compile_model(compiler, onnx_path, exe, "--quiet", *shape_args, *flags, *extra)
        run_executable(exe, inputs, out_dir)
        for name, reference in zip(names, expected):
            got = np.load(os.path.join(out_dir, file_name(name)))
            assert got.shape == reference.shape, (variant, name, got.shape, reference.shape)
            if reference.dtype.kind in "biu":
                np.testing.assert_array_equal(got, reference, err_msg=f"{variant} {name}")
                continue
            # Never compare on zeros: the reference must carry signal.
            scale = float(np.max(np.abs(reference)))
            assert scale > 0, f"{name}: the reference output is all zeros"
            error = float(np.max(np.abs(got.astype(np.float64) - reference))) / scale
            assert error < RELATIVE_TOLERANCE, (
                f"{variant} output {name}: relative error {error:.3g} >= {RELATIVE_TOLERANCE}")


# ---------------------------------------------------------------------------------------------
# Small generated models, one per op family.
# ---------------------------------------------------------------------------------------------

def _w(rng, name, shape, positive=False):
    values = rng.uniform(0.5, 1.5, size=shape) if positive else rng.standard_normal(shape) * 0.5
    return numpy_helper.from_array(values.astype(np.float32), name)


def _i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def _model(nodes, inputs, outputs, initializers=(), opset=OPSET):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def model_elementwise(rng):
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="add_bcast"),
        helper.make_node("Mul", ["a", "x"], ["m"], name="mul"),
        helper.make_node("Sub", ["m", "b"], ["s"], name="sub"),
        helper.make_node("Abs", ["s"], ["ab"], name="abs"),
        helper.make_node("Sqrt", ["ab"], ["sq"], name="sqrt"),
        helper.make_node("Add", ["sq", "one"], ["sq1"], name="add_one"),
        helper.make_node("Div", ["s", "sq1"], ["d"], name="div"),
        helper.make_node("Sigmoid", ["d"], ["sg"], name="sigmoid"),
        helper.make_node("Tanh", ["s"], ["th"], name="tanh"),
        helper.make_node("LeakyRelu", ["th"], ["lr"], name="leaky", alpha=0.2),
        helper.make_node("Erf", ["lr"], ["er"], name="erf"),
        helper.make_node("Exp", ["er"], ["ex"], name="exp"),
        helper.make_node("Log", ["ex"], ["lg"], name="log"),
        helper.make_node("Neg", ["lg"], ["ng"], name="neg"),
        helper.make_node("Relu", ["ng"], ["rl"], name="relu"),
        helper.make_node("Clip", ["sg", "lo", "hi"], ["cl"], name="clip"),
        helper.make_node("Max", ["cl", "rl"], ["mx"], name="max"),
        helper.make_node("Min", ["mx", "sg"], ["mn"], name="min"),
        helper.make_node("Pow", ["ab", "two"], ["pw"], name="pow"),
        helper.make_node("Add", ["mn", "pw"], ["y"], name="out"),
        helper.make_node("HardSigmoid", ["s"], ["hs"], name="hardsigmoid"),
        helper.make_node("HardSwish", ["s"], ["y2"], name="hardswish"),
        helper.make_node("Mul", ["hs", "th"], ["y3"], name="mul_out"),
    ]
    inits = [_w(rng, "b", [8]), numpy_helper.from_array(np.float32(1.0).reshape(()), "one"),
             numpy_helper.from_array(np.float32(0.2).reshape(()), "lo"),
             numpy_helper.from_array(np.float32(0.7).reshape(()), "hi"),
             numpy_helper.from_array(np.float32(2.0).reshape(()), "two")]
    return _model(nodes, [_f32("x", [2, 3, 8])],
                  [_f32("y", [2, 3, 8]), _f32("y2", [2, 3, 8]), _f32("y3", [2, 3, 8])], inits)


def model_matmul(rng):
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul_batched"),
        helper.make_node("Reshape", ["h", "shape"], ["h2"], name="reshape"),
        helper.make_node("Gemm", ["h2", "g", "c"], ["y"], name="gemm", transB=1, alpha=0.5,
                         beta=2.0),
        helper.make_node("MatMul", ["v", "m"], ["y2"], name="matmul_vector"),
        helper.make_node("Relu", ["y2"], ["y3"], name="relu"),
    ]
    inits = [_w(rng, "w", [2, 6, 5]), _w(rng, "g", [7, 15]), _w(rng, "c", [7]),
             _i64("shape", [2, 15]), _w(rng, "m", [3, 6, 4])]
    return _model(nodes, [_f32("x", [2, 3, 6]), _f32("v", [6])],
                  [_f32("y", [2, 7]), _f32("y3", [3, 4])], inits)


def model_conv(rng):
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv_pad_stride",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c1", "s", "bb", "mean", "var"], ["bn"],
                         name="bn", epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r1"], name="relu"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv_group_dilation",
                         kernel_shape=[3, 3], pads=[2, 2, 2, 2], dilations=[2, 2], group=2),
        helper.make_node("MaxPool", ["c2"], ["p1"], name="maxpool", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("AveragePool", ["c2"], ["p2"], name="avgpool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Add", ["p1", "p2"], ["p"], name="add"),
        helper.make_node("ConvTranspose", ["p", "wt", "bt"], ["u"], name="convtranspose",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["u"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["y"], name="flatten"),
    ]
    inits = [_w(rng, "w1", [4, 3, 3, 3]), _w(rng, "b1", [4]), _w(rng, "s", [4], True),
             _w(rng, "bb", [4]), _w(rng, "mean", [4]), _w(rng, "var", [4], True),
             _w(rng, "w2", [6, 2, 3, 3]), _w(rng, "wt", [6, 3, 2, 2]), _w(rng, "bt", [3])]
    return _model(nodes, [_f32("x", [2, 3, 16, 16])], [_f32("y", [2, 3]), _f32("u", [2, 3, 8, 8])],
                  inits)


def model_norm(rng):
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], name="layernorm",
                         axis=-1, epsilon=1e-5),
        helper.make_node("Softmax", ["ln"], ["sm"], name="softmax", axis=1),
        helper.make_node("ReduceMean", ["ln"], ["rm"], name="reducemean", axes=[-1],
                         keepdims=1),
        helper.make_node("Sub", ["ln", "rm"], ["d"], name="sub"),
        helper.make_node("ReduceSum", ["d", "axes"], ["rs"], name="reducesum", keepdims=0),
        helper.make_node("ReduceMax", ["sm"], ["rx"], name="reducemax", axes=[0, 2],
                         keepdims=0),
        helper.make_node("Relu", ["rs"], ["y2"], name="relu"),
    ]
    inits = [_w(rng, "gamma", [16], True), _w(rng, "beta", [16]), _i64("axes", [1])]
    return _model(nodes, [_f32("x", [2, 5, 16])],
                  [_f32("sm", [2, 5, 16]), _f32("rx", [5]), _f32("y2", [2, 16])], inits)


def model_data_movement(rng):
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], name="transpose", perm=[0, 2, 1]),
        helper.make_node("Split", ["t", "split"], ["s1", "s2"], name="split", axis=1),
        helper.make_node("Concat", ["s2", "s1", "s2"], ["c"], name="concat", axis=1),
        helper.make_node("Slice", ["c", "starts", "ends", "axes", "steps"], ["sl"],
                         name="slice"),
        helper.make_node("Gather", ["x", "idx"], ["g"], name="gather", axis=1),
        helper.make_node("Unsqueeze", ["g", "uaxes"], ["u"], name="unsqueeze"),
        helper.make_node("Squeeze", ["u", "uaxes"], ["q"], name="squeeze"),
        helper.make_node("Pad", ["q", "pads"], ["p"], name="pad", mode="reflect"),
        helper.make_node("Expand", ["row", "eshape"], ["e"], name="expand"),
        helper.make_node("Greater", ["sl", "e"], ["gt"], name="greater"),
        helper.make_node("Where", ["gt", "sl", "e"], ["w"], name="where"),
        helper.make_node("Cast", ["gt"], ["cf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Add", ["w", "cf"], ["y"], name="add"),
        helper.make_node("Resize", ["img", "", "scales"], ["rz"], name="resize",
                         mode="linear"),
        helper.make_node("Resize", ["img", "", "scales"], ["rn"], name="resize_nearest",
                         mode="nearest"),
        helper.make_node("Identity", ["rz"], ["y4"], name="identity"),
    ]
    inits = [_i64("split", [3, 3]), _i64("starts", [-1, 0]), _i64("ends", [-100, 4]),
             _i64("axes", [1, 2]), _i64("steps", [-2, 1]), _i64("idx", [[2, 0], [1, 1]]),
             _i64("uaxes", [0]), _i64("pads", [0, 1, 0, 0, 1, 0, 0, 1]),
             _w(rng, "row", [1, 1, 4]), _i64("eshape", [2, 5, 1]),
             numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "scales")]
    return _model(nodes, [_f32("x", [2, 4, 6]), _f32("img", [1, 2, 3, 4])],
                  [_f32("y", [2, 5, 4]), _f32("p", [3, 3, 2, 7]), _f32("rn", [1, 2, 6, 8]),
                   _f32("y4", [1, 2, 6, 8])],
                  inits)


def model_mod_scatter(rng):
    """Mod (floored and truncated integers, float fmod, broadcasting) and ScatterND at run time:
    rows and single elements, every reduction with repeated indices, negative indices, and a
    `data` that dies at the scatter (written in place when planned). Opset 18 for max/min."""
    nodes = [
        helper.make_node("Sub", ["n", "fifty"], ["signed"], name="center"),
        helper.make_node("Mod", ["signed", "divisors"], ["floored"], name="mod_floor"),
        helper.make_node("Mod", ["signed", "divisors"], ["truncated"], name="mod_trunc", fmod=1),
        helper.make_node("Mod", ["x", "fdiv"], ["fm"], name="mod_float", fmod=1),
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("ScatterND", ["r", "rows", "rowvals"], ["s_none"], name="scatter_rows"),
        helper.make_node("ScatterND", ["x", "elems", "elemvals"], ["s_add"], name="scatter_add",
                         reduction="add"),
        helper.make_node("ScatterND", ["x", "elems", "elemvals"], ["s_mul"], name="scatter_mul",
                         reduction="mul"),
        helper.make_node("ScatterND", ["x", "elems", "elemvals"], ["s_max"], name="scatter_max",
                         reduction="max"),
        helper.make_node("ScatterND", ["x", "elems", "elemvals"], ["s_min"], name="scatter_min",
                         reduction="min"),
        helper.make_node("ScatterND", ["floored", "irows", "ivals"], ["s_int"], name="scatter_int",
                         reduction="add"),
        helper.make_node("Add", ["s_none", "fm"], ["y"], name="sum"),
    ]
    inits = [_i64("fifty", [50]), _i64("divisors", [[7], [-7], [3]]),
             numpy_helper.from_array(np.array([0.7, -1.3, 2.1, 0.4, -0.9], np.float32), "fdiv"),
             _i64("rows", [[1, 0], [-1, 2], [0, -4]]), _w(rng, "rowvals", [3, 5]),
             _i64("elems", [[0, 1, 4], [2, 3, 0], [0, 1, 4], [-1, -1, -1], [0, 1, 4]]),
             _w(rng, "elemvals", [5]), _i64("irows", [[2], [0], [2]]),
             _i64("ivals", [[5, -6, 7, 8], [1, 2, 3, 4], [-9, 10, 11, 12]])]
    i64 = TensorProto.INT64
    return _model(nodes, [_f32("x", [3, 4, 5]), helper.make_tensor_value_info("n", i64, [4])],
                  [_f32("y", [3, 4, 5]), _f32("s_add", [3, 4, 5]), _f32("s_mul", [3, 4, 5]),
                   _f32("s_max", [3, 4, 5]), _f32("s_min", [3, 4, 5]),
                   helper.make_tensor_value_info("truncated", i64, [3, 4]),
                   helper.make_tensor_value_info("s_int", i64, [3, 4])],
                  inits, opset=18)


def model_shared_outputs(rng):
    """Outputs that share storage: an input returned as is, one value returned twice, a
    weight returned as is, a view of an output."""
    nodes = [
        helper.make_node("Identity", ["x"], ["same_as_input"], name="pass_input"),
        helper.make_node("Sigmoid", ["x"], ["s"], name="sigmoid"),
        helper.make_node("Identity", ["s"], ["s_again"], name="second_use"),
        helper.make_node("Reshape", ["s", "shape"], ["s_flat"], name="view_of_output"),
        helper.make_node("Identity", ["k"], ["weight_out"], name="pass_weight"),
    ]
    inits = [_w(rng, "k", [3]), _i64("shape", [-1])]
    return _model(nodes, [_f32("x", [2, 3])],
                  [_f32("same_as_input", [2, 3]), _f32("s", [2, 3]), _f32("s_again", [2, 3]),
                   _f32("s_flat", [6]), _f32("weight_out", [3])], inits)


GENERATED = {
    "elementwise": model_elementwise,
    "matmul_gemm": model_matmul,
    "conv_pool_norm": model_conv,
    "layernorm_softmax_reduce": model_norm,
    "data_movement_resize": model_data_movement,
    "shared_outputs": model_shared_outputs,
    "mod_scatter_nd": model_mod_scatter,
}


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_model(name, compiler, tmp_path):
    model = GENERATED[name](np.random.default_rng(len(name)))
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(model, path)
    check_against_onnxruntime(compiler, path, str(tmp_path))


def test_bundled_model(compiler, tmp_path):
    check_against_onnxruntime(compiler, zoo.BUNDLED_PATH, str(tmp_path),
                              {n: s for n, (s, _) in zoo.BUNDLED.inputs.items()})


def test_planning_shrinks_the_arena(compiler, tmp_path):
    """The planned arena of the bundled model is smaller than the no-reuse layout."""
    sizes = {}
    for variant, flags in (("planned", []), ("noplan", ["--no-plan"])):
        out = str(tmp_path / f"{variant}.mlir")
        proc = _run([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", out, "--quiet",
                     *flags])
        assert proc.returncode == 0, proc.stderr
        sizes[variant] = int(re.search(r"memopt.arena_size = (\d+)", open(out).read()).group(1))
    assert 0 < sizes["planned"] < sizes["noplan"], sizes


def test_budget_report_and_emit_kinds(compiler, tmp_path):
    """--report writes the plan's JSON (matching the IR), an impossible --memory-budget fails
    with one error giving the smallest arena reached, --emit mlir stops before planning.
    (--precision: test_mixed_precision.py; budgets met by recomputation: test_remat.py.)"""
    plan = str(tmp_path / "plan.mlir")
    report_path = str(tmp_path / "report.json")
    proc = _run([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", plan, "--report",
                 report_path, "--memory-budget", "2GiB"])
    assert proc.returncode == 0, proc.stderr
    assert "[memory]" in proc.stdout and "max-live" in proc.stdout
    report = json.load(open(report_path))
    arena = int(re.search(r"memopt.arena_size = (\d+)", open(plan).read()).group(1))
    assert report["arena_bytes"] == arena and 0 < report["max_live_bytes"] <= arena

    below = report["max_live_bytes"] // 2
    proc = _run([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", plan, "--memory-budget",
                 str(below)])
    assert proc.returncode != 0
    assert (f"the arena does not fit in the memory budget of 128.00 KiB ({below} bytes): "
            f"without recomputation it is 256.00 KiB; the smallest arena reached"
            in proc.stderr), proc.stderr
    assert proc.stderr.count("error:") == 1, proc.stderr

    graph = str(tmp_path / "graph.mlir")
    proc = _run([compiler, zoo.BUNDLED_PATH, "--emit", "mlir", "-o", graph, "--quiet"])
    assert proc.returncode == 0, proc.stderr
    text = open(graph).read()
    assert "memopt.conv" in text and "memopt.offsets" not in text


# ---------------------------------------------------------------------------------------------
# Attention fusion: the exporters' forms, fused, against onnxruntime and the unfused program.
# ---------------------------------------------------------------------------------------------

def _heads(x, weight, shape, perm, prefix):
    """MatMul(x, weight) -> Reshape(shape) -> Transpose(perm), as the exporters split heads."""
    return [helper.make_node("MatMul", [x, weight], [prefix + "_mm"], name=prefix + "_mm"),
            helper.make_node("Reshape", [prefix + "_mm", prefix + "_shape"], [prefix + "_r"],
                             name=prefix + "_reshape"),
            helper.make_node("Transpose", [prefix + "_r"], [prefix], name=prefix + "_t",
                             perm=perm)]


def model_attention(rng):
    """Four attentions over x [2, 6, 8] (2 heads of 4):
    1. BERT (torchscript) with a key padding mask from an input: K^T by perm [0, 2, 3, 1],
       Div by sqrt(d), Where(keep, scores, -inf);
    2. GPT-2 / HF / ViT (dynamo): Q and K each scaled, K^T = Transpose(K) of the last two axes,
       the causal Where(mask, -inf, scores) with a constant mask, an additive bias constant;
    3. swin's shifted window: 4 windows, relative-position bias added in [4, 2, 3, 3], the
       window mask added in a [2, 2, 2, 3, 3] view (Reshape, Add, Reshape);
    4. not fused: the probabilities are also an output."""
    nodes = [helper.make_node("Greater", ["m", "zero"], ["gt"], name="mask_gt"),
             helper.make_node("Or", ["gt", "first"], ["keep2"], name="mask_or"),
             helper.make_node("Reshape", ["keep2", "mask_shape"], ["keep"], name="mask_view")]
    bhsd, bhds = [0, 2, 1, 3], [0, 2, 3, 1]
    nodes += _heads("x", "wq1", bhsd, bhsd, "q1") + _heads("x", "wk1", bhsd, bhds, "k1")
    nodes += _heads("x", "wv1", bhsd, bhsd, "v1")
    nodes += [helper.make_node("MatMul", ["q1", "k1"], ["s1"], name="a1_qk"),
              helper.make_node("Div", ["s1", "two"], ["d1"], name="a1_div"),
              helper.make_node("Where", ["keep", "d1", "ninf"], ["w1"], name="a1_where"),
              helper.make_node("Softmax", ["w1"], ["p1"], name="a1_softmax", axis=-1),
              helper.make_node("MatMul", ["p1", "v1"], ["y1"], name="a1_pv")]
    for name in ("q2", "k2", "v2"):
        nodes += _heads("x", "w" + name, name + "_shape", bhsd, name)
    nodes += [helper.make_node("Mul", ["q2", "root"], ["q2s"], name="a2_qscale"),
              helper.make_node("Transpose", ["k2"], ["k2t"], name="a2_kt", perm=[0, 1, 3, 2]),
              helper.make_node("Mul", ["k2t", "root"], ["k2s"], name="a2_kscale"),
              helper.make_node("MatMul", ["q2s", "k2s"], ["s2"], name="a2_qk"),
              helper.make_node("Where", ["causal", "lowest", "s2"], ["w2"], name="a2_causal"),
              helper.make_node("Add", ["w2", "bias2"], ["b2"], name="a2_bias"),
              helper.make_node("Softmax", ["b2"], ["p2"], name="a2_softmax", axis=-1),
              helper.make_node("MatMul", ["p2", "v2"], ["y2"], name="a2_pv")]
    for name in ("q3", "k3", "v3"):
        nodes += _heads("x", "w" + name, name + "_shape", bhsd, name)
    nodes += [helper.make_node("Mul", ["q3", "half"], ["q3s"], name="a3_qscale"),
              helper.make_node("Transpose", ["k3"], ["k3t"], name="a3_kt", perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q3s", "k3t"], ["s3"], name="a3_qk"),
              helper.make_node("Add", ["s3", "relpos"], ["r3"], name="a3_relpos"),
              helper.make_node("Reshape", ["r3", "win5"], ["r3w"], name="a3_view5"),
              helper.make_node("Add", ["r3w", "winmask"], ["r3m"], name="a3_mask"),
              helper.make_node("Reshape", ["r3m", "win4"], ["r3b"], name="a3_view4"),
              helper.make_node("Softmax", ["r3b"], ["p3"], name="a3_softmax", axis=-1),
              helper.make_node("MatMul", ["p3", "v3"], ["y3"], name="a3_pv")]
    nodes += [helper.make_node("MatMul", ["q1", "k1"], ["s4"], name="a4_qk"),
              helper.make_node("Softmax", ["s4"], ["p4"], name="a4_softmax", axis=-1),
              helper.make_node("MatMul", ["p4", "v1"], ["y4"], name="a4_pv")]
    causal = np.triu(np.ones((6, 6), dtype=bool), k=1)
    winmask = np.where(rng.random((1, 2, 1, 3, 3)) < 0.3, -100.0, 0.0).astype(np.float32)
    inits = [_w(rng, n, [8, 8]) for n in ("wq1", "wk1", "wv1", "wq2", "wk2", "wv2", "wq3",
                                          "wk3", "wv3")]
    inits += [_i64(n, [2, 6, 2, 4]) for n in ("q1_shape", "k1_shape", "v1_shape", "q2_shape",
                                             "k2_shape", "v2_shape")]
    inits += [_i64(n, [4, 3, 2, 4]) for n in ("q3_shape", "k3_shape", "v3_shape")]
    inits += [numpy_helper.from_array(np.float32(v).reshape(()), n)
              for n, v in (("zero", 0.0), ("two", 2.0), ("ninf", -np.inf), ("half", 0.5),
                           ("root", 0.5 ** 0.5), ("lowest", np.finfo(np.float32).min))]
    inits += [numpy_helper.from_array(np.eye(1, 6, dtype=bool), "first"),
              _i64("mask_shape", [2, 1, 1, 6]),
              numpy_helper.from_array(causal, "causal"), _w(rng, "bias2", [2, 6, 6]),
              _w(rng, "relpos", [2, 3, 3]), _i64("win5", [2, 2, 2, 3, 3]),
              numpy_helper.from_array(winmask, "winmask"), _i64("win4", [4, 2, 3, 3])]
    return _model(nodes, [_f32("x", [2, 6, 8]), _f32("m", [2, 6])],
                  [_f32("y1", [2, 2, 6, 4]), _f32("y2", [2, 2, 6, 4]), _f32("y3", [4, 2, 3, 4]),
                   _f32("y4", [2, 2, 6, 4]), _f32("p4", [2, 2, 6, 6])], inits)


def test_attention_fusion_matches_onnxruntime(compiler, tmp_path):
    """Three of the four attentions fuse (one causal, one with K^T taken from its
    transpose, one regrouped into the 5-D window view); fused and unfused programs both
    match onnxruntime."""
    path = str(tmp_path / "attention.onnx")
    onnx.save(model_attention(np.random.default_rng(7)), path)
    graph = str(tmp_path / "graph.mlir")
    proc = _run([compiler, path, "--emit", "mlir", "-o", graph, "--quiet"])
    assert proc.returncode == 0, proc.stderr
    fused = [line for line in open(graph) if "memopt.attention" in line]
    assert len(fused) == 3, "".join(fused)
    assert sum("causal = true" in line for line in fused) == 1, "".join(fused)
    assert sum("key_transposed = true" in line for line in fused) == 1, "".join(fused)
    assert any("tensor<2x2x2x3x4xf32>" in line for line in fused), "".join(fused)
    check_against_onnxruntime(compiler, path, str(tmp_path / "fused"))
    check_against_onnxruntime(compiler, path, str(tmp_path / "unfused"),
                              extra=("--no-fuse-attention",))


def left_padded(shape):
    """attention_mask [2, 6]: the second sequence starts with two padding tokens."""
    mask = np.ones(shape, dtype=np.int64)
    mask[1, :2] = 0
    return mask


def model_safe_softmax_attention(rng):
    """GPT-2 attention as torch 2.11's dynamo exporter writes transformers 5.x SDPA with a
    boolean mask (onnxscript): Q and K^T each scaled by sqrt(scale), K^T by Reshape ->
    Transpose -> Reshape, the mask = causal And attention_mask[batch, key] (a GatherND with
    constant indices), added as Where(mask, 0, -inf), then Softmax -> IsNaN ->
    Where(isnan, 0, P). With left padding, the first two query rows of the second sequence
    see no key: the safe softmax gives them zeros."""
    n = helper.make_node
    bhsd = [0, 2, 1, 3]
    nodes = []
    for name in ("q", "k", "v"):
        nodes += _heads("x", "w" + name, name + "_shape", bhsd, name)
    nodes += [n("Reshape", ["k", "k3_shape"], ["k3"], name="k_squeeze"),
              n("Transpose", ["k3"], ["k3t"], name="k_transpose", perm=[0, 2, 1]),
              n("Reshape", ["k3t", "kt_shape"], ["kt"], name="k_unsqueeze"),
              n("Mul", ["q", "root"], ["qs"], name="q_scale"),
              n("Mul", ["kt", "root"], ["kts"], name="k_scale"),
              n("Cast", ["attention_mask"], ["keep_keys"], name="mask_cast",
                to=TensorProto.BOOL),
              n("GatherND", ["keep_keys", "key_index"], ["padding"], name="mask_gather"),
              n("And", ["causal", "padding"], ["keep"], name="mask_and"),
              n("Where", ["keep", "zero", "ninf"], ["bias"], name="mask_bias"),
              n("MatMul", ["qs", "kts"], ["scores"], name="qk"),
              n("Add", ["scores", "bias"], ["masked"], name="mask_add"),
              n("Softmax", ["masked"], ["p"], name="softmax", axis=-1),
              n("IsNaN", ["p"], ["nan"], name="isnan"),
              n("Where", ["nan", "zero", "p"], ["safe"], name="safe"),
              n("MatMul", ["safe", "v"], ["y"], name="pv")]
    key_index = np.zeros((2, 1, 1, 6, 2), dtype=np.int64)
    key_index[..., 0] = np.arange(2).reshape(2, 1, 1, 1)
    key_index[..., 1] = np.arange(6)
    inits = [_w(rng, "w" + name, [8, 8]) for name in "qkv"]
    inits += [_i64(name + "_shape", [2, 6, 2, 4]) for name in "qkv"]
    inits += [_i64("k3_shape", [-1, 6, 4]),
              _i64("kt_shape", [2, 2, 4, 6]), numpy_helper.from_array(key_index, "key_index"),
              numpy_helper.from_array(np.tril(np.ones((6, 6), dtype=bool)), "causal")]
    inits += [numpy_helper.from_array(np.float32(v).reshape(()), name)
              for name, v in (("zero", 0.0), ("ninf", -np.inf), ("root", 0.5 ** 0.5))]
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [2, 6])
    return _model(nodes, [_f32("x", [2, 6, 8]), mask], [_f32("y", [2, 2, 6, 4])], inits)


def test_safe_softmax_attention_matches_onnxruntime(compiler, tmp_path):
    """The safe-softmax attention fuses (safe_softmax = true, no is_nan left); fused and
    unfused (IsNaN kernel) programs match onnxruntime, fully masked rows (zeros) included."""
    path = str(tmp_path / "safe.onnx")
    onnx.save(model_safe_softmax_attention(np.random.default_rng(5)), path)
    graph = str(tmp_path / "graph.mlir")
    proc = _run([compiler, path, "--emit", "mlir", "-o", graph, "--quiet"])
    assert proc.returncode == 0, proc.stderr
    text = open(graph).read()
    fused = [line for line in text.splitlines() if "memopt.attention" in line]
    assert len(fused) == 1 and "safe_softmax = true" in fused[0], text
    assert "memopt.is_nan" not in text and "memopt.softmax" not in text, text
    session, inputs = random_inputs(path, {})
    inputs["attention_mask"] = left_padded((2, 6))
    reference = session.run(None, inputs)[0]
    assert np.all(reference[1, :, :2] == 0) and np.all(np.abs(reference[0]) > 0)
    values = {"attention_mask": left_padded}
    check_against_onnxruntime(compiler, path, str(tmp_path / "fused"), values=values)
    check_against_onnxruntime(compiler, path, str(tmp_path / "unfused"), values=values,
                              extra=("--no-fuse-attention",))


def model_attention_forms(rng):
    """Three attentions over x [2, 6, 16] (4 heads of 4) in the forms the fusion matches by
    meaning rather than by spelling:
    1. BLOOM's ALiBi: scores over merged batch x heads [8, 6, 6], scaled, the alibi bias
       [8, 1, 6] added there, a view to [2, 4, 6, 6], the causal mask added as a [2, 1, 6, 6]
       constant (the same per sequence), the softmax, a view back, MatMul(P, V);
    2. grouped-query attention: K and V of 2 heads repeated for 4 by Unsqueeze -> Expand ->
       Reshape, the scale Mul by Sqrt(1/4) (not folded), a causal mask from Range and
       LessOrEqual (folded at import);
    3. a sliding window (key j kept for i - 3 < j <= i) through Where with -inf, after a bias
       and a scale applied to scores and bias together."""
    n = helper.make_node
    bhsd = [0, 2, 1, 3]
    nodes = []
    for name in ("q1", "k1", "v1", "q2", "q3", "k3", "v3"):
        nodes += _heads("x", "w" + name, name + "_shape", bhsd, name)
    for name in ("k2", "v2"):
        nodes += _heads("x", "w" + name, name + "_shape", bhsd, name)
    nodes += [n("Reshape", ["q1", "merged_shape"], ["q1m"], name="a1_qview"),
              n("Reshape", ["k1", "merged_shape"], ["k1m"], name="a1_kview"),
              n("Reshape", ["v1", "merged_shape"], ["v1m"], name="a1_vview"),
              n("Transpose", ["k1m"], ["k1t"], name="a1_kt", perm=[0, 2, 1]),
              n("MatMul", ["q1m", "k1t"], ["s1"], name="a1_qk"),
              n("Mul", ["s1", "half"], ["s1s"], name="a1_scale"),
              n("Add", ["s1s", "alibi"], ["s1a"], name="a1_alibi"),
              n("Reshape", ["s1a", "scores4"], ["s1r"], name="a1_view4"),
              n("Add", ["s1r", "causal_add"], ["s1c"], name="a1_causal"),
              n("Softmax", ["s1c"], ["p1"], name="a1_softmax", axis=-1),
              n("Reshape", ["p1", "scores3"], ["p1m"], name="a1_view3"),
              n("MatMul", ["p1m", "v1m"], ["y1m"], name="a1_pv"),
              n("Reshape", ["y1m", "out4"], ["y1"], name="a1_out")]
    nodes += [n("Unsqueeze", ["k2", "axis2"], ["k2u"], name="a2_kunsq"),
              n("Expand", ["k2u", "repeat"], ["k2e"], name="a2_kexpand"),
              n("Reshape", ["k2e", "heads4"], ["k2r"], name="a2_kmerge"),
              n("Unsqueeze", ["v2", "axis2"], ["v2u"], name="a2_vunsq"),
              n("Expand", ["v2u", "repeat"], ["v2e"], name="a2_vexpand"),
              n("Reshape", ["v2e", "heads4"], ["v2r"], name="a2_vmerge"),
              n("Transpose", ["k2r"], ["k2t"], name="a2_kt", perm=[0, 1, 3, 2]),
              n("Sqrt", ["quarter"], ["root"], name="a2_root"),
              n("MatMul", ["q2", "k2t"], ["s2"], name="a2_qk"),
              n("Mul", ["s2", "root"], ["s2s"], name="a2_scale"),
              n("Range", ["start", "limit", "delta"], ["positions"], name="a2_range"),
              n("Unsqueeze", ["positions", "axis1"], ["rows"], name="a2_rows"),
              n("Unsqueeze", ["positions", "axis0"], ["cols"], name="a2_cols"),
              n("LessOrEqual", ["cols", "rows"], ["keep2"], name="a2_causal"),
              n("Where", ["keep2", "s2s", "lowest"], ["s2m"], name="a2_mask"),
              n("Softmax", ["s2m"], ["p2"], name="a2_softmax", axis=-1),
              n("MatMul", ["p2", "v2r"], ["y2"], name="a2_pv")]
    nodes += [n("Transpose", ["k3"], ["k3t"], name="a3_kt", perm=[0, 1, 3, 2]),
              n("MatMul", ["q3", "k3t"], ["s3"], name="a3_qk"),
              n("Add", ["s3", "bias3"], ["s3b"], name="a3_bias"),
              n("Mul", ["s3b", "half"], ["s3s"], name="a3_scale"),
              n("Where", ["window", "s3s", "ninf"], ["s3w"], name="a3_window"),
              n("Softmax", ["s3w"], ["p3"], name="a3_softmax", axis=-1),
              n("MatMul", ["p3", "v3"], ["y3"], name="a3_pv")]
    rows, cols = np.indices((6, 6))
    causal_add = np.where(cols > rows, np.finfo(np.float32).min, 0).astype(np.float32)
    inits = [_w(rng, "w" + name, [16, 16]) for name in ("q1", "k1", "v1", "q2", "q3", "k3",
                                                           "v3")]
    inits += [_w(rng, "w" + name, [16, 8]) for name in ("k2", "v2")]
    inits += [_i64(name + "_shape", [2, 6, 4, 4]) for name in ("q1", "k1", "v1", "q2", "q3",
                                                               "k3", "v3")]
    inits += [_i64(name + "_shape", [2, 6, 2, 4]) for name in ("k2", "v2")]
    inits += [_i64("merged_shape", [8, 6, 4]), _i64("scores4", [2, 4, 6, 6]),
              _i64("scores3", [8, 6, 6]), _i64("out4", [2, 4, 6, 4]),
              _i64("axis0", [0]), _i64("axis1", [1]), _i64("axis2", [2]),
              _i64("repeat", [2, 2, 2, 6, 4]), _i64("heads4", [2, 4, 6, 4]),
              numpy_helper.from_array(np.int64(0), "start"),
              numpy_helper.from_array(np.int64(6), "limit"),
              numpy_helper.from_array(np.int64(1), "delta"),
              numpy_helper.from_array(
                  (-0.5 * np.abs(rng.standard_normal((8, 1, 6)))).astype(np.float32), "alibi"),
              numpy_helper.from_array(np.broadcast_to(causal_add, (2, 1, 6, 6)).copy(),
                                      "causal_add"),
              _w(rng, "bias3", [4, 6, 6]),
              numpy_helper.from_array((cols <= rows) & (cols > rows - 3), "window")]
    inits += [numpy_helper.from_array(np.float32(v).reshape(()), name)
              for name, v in (("half", 0.5), ("quarter", 0.25), ("ninf", -np.inf),
                              ("lowest", np.finfo(np.float32).min))]
    return _model(nodes, [_f32("x", [2, 6, 16])],
                  [_f32("y1", [2, 4, 6, 4]), _f32("y2", [2, 4, 6, 4]), _f32("y3", [2, 4, 6, 4])],
                  inits)


def test_attention_forms_match_onnxruntime(compiler, tmp_path):
    """BLOOM's merged-heads ALiBi, GQA's repeated K / V and a sliding window after a scaled
    bias all fuse (the ALiBi and GQA attentions causal, GQA reading K and V before the
    repeat, the window as a bias); fused and unfused programs match onnxruntime, and the
    compile log reports each site with its mask."""
    path = str(tmp_path / "forms.onnx")
    onnx.save(model_attention_forms(np.random.default_rng(11)), path)
    graph = str(tmp_path / "graph.mlir")
    proc = _run([compiler, path, "--emit", "mlir", "-o", graph])
    assert proc.returncode == 0, proc.stderr
    text = open(graph).read()
    fused = [line for line in text.splitlines() if "memopt.attention" in line]
    assert len(fused) == 3 and "memopt.softmax" not in text, "\n".join(fused)
    assert sum("causal = true" in line for line in fused) == 2, "\n".join(fused)
    assert any("tensor<2x2x1x6x4xf32>" in line for line in fused), "\n".join(fused)
    assert "memopt.expand" not in text
    assert "[fuse-attention] 3 memopt.attention ops; 3 of 3 attention sites fused" in proc.stdout
    for site, mask in (("a1_softmax", "causal"), ("a2_softmax", "causal"),
                       ("a3_softmax", "sliding window")):
        assert f"'{site}': fused, mask {mask};" in proc.stdout, proc.stdout
    check_against_onnxruntime(compiler, path, str(tmp_path / "fused"))
    check_against_onnxruntime(compiler, path, str(tmp_path / "unfused"),
                              extra=("--no-fuse-attention",))


def planned_arenas(compiler, path, tmp_path, no_fusion_flag):
    """Arena bytes of the planned model with a fusion on ("fused") and off ("unfused")."""
    arenas = {}
    for variant, flags in (("fused", []), ("unfused", [no_fusion_flag])):
        report = str(tmp_path / f"{variant}.json")
        proc = _run([compiler, path, "--emit", "plan", "-o", str(tmp_path / f"{variant}.mlir"),
                     "--report", report, "--quiet", *flags])
        assert proc.returncode == 0, proc.stderr
        arenas[variant] = json.load(open(report))["arena_bytes"]
    return arenas


def test_attention_fusion_shrinks_the_arena(compiler, tmp_path):
    """One head block of 2 x 256 queries: the unfused plan holds [2, 256, 256] scores and
    probabilities; the fused one never does."""
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"], name="qk"),
             helper.make_node("Mul", ["s", "scale"], ["ss"], name="scale"),
             helper.make_node("Softmax", ["ss"], ["p"], name="softmax", axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"], name="pv")]
    inits = [numpy_helper.from_array(np.float32(0.25).reshape(()), "scale")]
    model = _model(nodes, [_f32(n, [2, 256, 16]) for n in "qkv"], [_f32("y", [2, 256, 16])],
                   inits)
    path = str(tmp_path / "attention.onnx")
    onnx.save(model, path)
    arenas = planned_arenas(compiler, path, tmp_path, "--no-fuse-attention")
    scores = 2 * 256 * 256 * 4
    assert arenas["unfused"] >= scores, arenas
    assert arenas["fused"] < scores // 4, arenas
    check_against_onnxruntime(compiler, path, str(tmp_path / "run"))


def model_elementwise_chains(rng):
    """EfficientNet's spelled-out swish, MobileNetV3's hard-swish-like gate with a per-channel
    scale, ResNet's residual add + relu, a GELU (erf form) and a clip/leaky tail: trees of
    elementwise ops with broadcast inputs and intermediates of one use."""
    n = helper.make_node
    nodes = [n("Sigmoid", ["x"], ["sg"], name="sig"),
             n("Mul", ["x", "sg"], ["swish"], name="swish"),
             n("Mul", ["swish", "scale"], ["scaled"], name="scale"),
             n("Add", ["scaled", "shift"], ["shifted"], name="shift"),
             n("HardSigmoid", ["shifted"], ["hs"], name="hsig", alpha=0.2, beta=0.5),
             n("Mul", ["shifted", "hs"], ["hswish"], name="hswish"),
             n("Add", ["hswish", "r"], ["res"], name="residual"),
             n("Relu", ["res"], ["y1"], name="relu"),
             # GELU, erf form: 0.5 * x * (1 + erf(x / sqrt(2))).
             n("Div", ["r", "sqrt2"], ["xs"], name="gelu_div"),
             n("Erf", ["xs"], ["e"], name="gelu_erf"),
             n("Add", ["e", "one"], ["e1"], name="gelu_add"),
             n("Mul", ["r", "e1"], ["g"], name="gelu_mul"),
             n("Mul", ["g", "half"], ["gelu"], name="gelu_half"),
             n("Clip", ["gelu", "lo", "hi"], ["c"], name="clip"),
             n("LeakyRelu", ["c"], ["y2"], name="leaky", alpha=0.1)]
    inits = [_w(rng, "scale", [8, 1, 1]), _w(rng, "shift", [1]),
             numpy_helper.from_array(np.float32(np.sqrt(2.0)).reshape(()), "sqrt2"),
             numpy_helper.from_array(np.float32(1.0).reshape(()), "one"),
             numpy_helper.from_array(np.float32(0.5).reshape(()), "half"),
             numpy_helper.from_array(np.float32(-0.4).reshape(()), "lo"),
             numpy_helper.from_array(np.float32(0.9).reshape(()), "hi")]
    shape = [2, 8, 16, 16]
    return _model(nodes, [_f32("x", shape), _f32("r", shape)],
                  [_f32("y1", shape), _f32("y2", shape)], inits)


def test_elementwise_fusion_matches_onnxruntime_and_shrinks_the_arena(compiler, tmp_path):
    """The two chains become two fused_elementwise ops (all 15 ops), fused and unfused
    programs both match onnxruntime, and the fused plan keeps no intermediate: the arena is
    the two outputs alone, where the unfused plan also holds at least one 16 KiB
    intermediate next to them."""
    path = str(tmp_path / "chains.onnx")
    onnx.save(model_elementwise_chains(np.random.default_rng(11)), path)
    graph = str(tmp_path / "graph.mlir")
    proc = _run([compiler, path, "--emit", "mlir", "-o", graph, "--quiet"])
    assert proc.returncode == 0, proc.stderr
    text = open(graph).read()
    assert text.count("memopt.fused_elementwise") == 2, text
    for op in ("memopt.sigmoid", "memopt.erf", "memopt.relu", "memopt.mul"):
        assert op not in text, op
    arenas = planned_arenas(compiler, path, tmp_path, "--no-fuse-elementwise")
    output = 2 * 8 * 16 * 16 * 4
    assert arenas["fused"] == 2 * output, arenas
    assert arenas["unfused"] >= 3 * output, arenas
    check_against_onnxruntime(compiler, path, str(tmp_path / "fused"))
    check_against_onnxruntime(compiler, path, str(tmp_path / "unfused"),
                              extra=("--no-fuse-elementwise",))


# ---------------------------------------------------------------------------------------------
# The zoo. Models the host runtime cannot run yet, with the missing piece named.
# ---------------------------------------------------------------------------------------------

ZOO_EXPECTED_FAILURES = {}


@pytest.mark.parametrize("model", tiers.params(zoo.MODELS, tiers.ZOO, id=lambda m: m.id,
                                               failures=ZOO_EXPECTED_FAILURES))
def test_zoo_model(model, compiler, tmp_path):
    onnx_path = fill_weights.fill(model.path, str(tmp_path / "model"))
    shapes = {name: shape for name, (shape, _) in model.inputs.items()}
    check_against_onnxruntime(compiler, onnx_path, str(tmp_path), shapes, values=model.values)
    # The CUDA target of the same model: generated, compiled with nvcc and linked against the
    # CUDA runtime by memopt-compile (building needs no GPU), so a codegen break fails here
    # rather than on the GPU machine. Its source is the host program's, byte for byte.
    out = str(tmp_path / "cuda")
    argv = [compiler, onnx_path, "-o", out, "--target", "cuda", "--arch", "sm_90", "--quiet"]
    for name, shape in shapes.items():
        argv += ["--input-shape", f"{name}={'x'.join(str(d) for d in shape)}"]
    proc = _run(argv)
    assert proc.returncode == 0, f"{' '.join(argv)}\n{proc.stderr[-4000:]}"
    with open(out, "rb") as stream:
        assert stream.read(4) == b"\x7fELF", "the CUDA target did not produce an executable"
    with open(out + ".cu") as cuda_source, \
            open(os.path.join(str(tmp_path), "planned", "model.cpp")) as host_source:
        assert cuda_source.read() == host_source.read(), "CUDA and host sources differ"


# ---------------------------------------------------------------------------------------------
# CUDA target: the generated source compiles with nvcc (no GPU needed).
# ---------------------------------------------------------------------------------------------

def _nvcc():
    path = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.isfile(path):
        pytest.fail("nvcc not found (install the CUDA toolkit): the CUDA target cannot be "
                    "checked", pytrace=False)
    return path


def test_cuda_source_compiles_with_nvcc(compiler, tmp_path):
    out = str(tmp_path / "tiny")
    proc = _run([compiler, zoo.BUNDLED_PATH, "-o", out, "--target", "cuda", "--emit", "source",
                 "--arch", "sm_90", "--quiet"])
    assert proc.returncode == 0, proc.stderr
    script = open(out + ".build.sh").read()
    assert "-arch=sm_90" in script and "libmemopt_runtime_cuda.a" in script
    assert "tiny.cu" in script
    include = os.path.join(zoo.REPO, "include")
    obj = out + ".o"
    proc = _run([_nvcc(), "-std=c++17", "-arch=sm_90", "-c", out + ".cu", "-I" + include,
                 "-o", obj])
    assert proc.returncode == 0, proc.stderr[-4000:]
    symbols = _run(["nm", obj]).stdout
    assert re.search(r"\bT memopt_program\b", symbols), symbols[-2000:]
    # The weight image is the one the host target writes.
    assert os.path.getsize(out + ".weights") > 0


def test_cuda_fused_elementwise_kernels_are_generated(compiler, tmp_path):
    """The CUDA program of the elementwise-chains model carries one generated kernel type per
    distinct chain (FusedProgramN, compiled by nvcc for sm_90 and the vector / scalar and 32-
    / 64-bit index variants), while the host build of the same source keeps the step
    interpreter."""
    path = str(tmp_path / "chains.onnx")
    onnx.save(model_elementwise_chains(np.random.default_rng(11)), path)
    out = str(tmp_path / "chains")
    proc = _run([compiler, path, "-o", out, "--target", "cuda", "--emit", "source",
                 "--arch", "sm_90", "--quiet"])
    assert proc.returncode == 0, proc.stderr
    source = open(out + ".cu").read()
    assert source.count("fusedElementwiseProgram<FusedProgram") == 2, source[-3000:]
    assert "binaryStep(BinaryOp::Div, x[0], x[1])" in source
    assert "unaryStep(UnaryOp::Erf" in source
    include = os.path.join(zoo.REPO, "include")
    obj = out + ".o"
    proc = _run([_nvcc(), "-std=c++17", "-O1", "-arch=sm_90", "-c", out + ".cu", "-I" + include,
                 "-o", obj])
    assert proc.returncode == 0, proc.stderr[-4000:]
    kernels = set(re.findall(r"fused6kernelIN\w*?(FusedProgram\d)", _run(["nm", obj]).stdout))
    assert kernels == {"FusedProgram0", "FusedProgram1"}, kernels
    host = str(tmp_path / "host.o")
    proc = _run(["g++", "-std=c++17", "-x", "c++", "-c", out + ".cu", "-I" + include,
                 "-o", host])
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "fusedElementwise" in _run(["nm", "-C", host]).stdout


def _load_c_api(library):
    """The C API of a model compiled with --emit lib (include/memopt/Runtime/memopt_c_api.h)."""
    lib = ctypes.CDLL(library)
    lib.memopt_model_create.restype = ctypes.c_void_p
    lib.memopt_model_create.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p,
                                        ctypes.c_size_t]
    lib.memopt_model_run.restype = ctypes.c_int
    lib.memopt_model_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                     ctypes.POINTER(ctypes.c_void_p)]
    lib.memopt_model_error.restype = ctypes.c_char_p
    lib.memopt_model_error.argtypes = [ctypes.c_void_p]
    for name in ("memopt_model_num_inputs", "memopt_model_num_outputs"):
        getattr(lib, name).restype = ctypes.c_int
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    lib.memopt_model_tensor_name.restype = ctypes.c_char_p
    lib.memopt_model_tensor_name.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.memopt_model_tensor_bytes.restype = ctypes.c_size_t
    lib.memopt_model_tensor_bytes.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.memopt_model_destroy.restype = None
    lib.memopt_model_destroy.argtypes = [ctypes.c_void_p]
    return lib


def test_shared_library_c_api_matches_onnxruntime(compiler, tmp_path):
    """--emit lib: OUT.so exports the C API; the bundled model loaded through ctypes runs
    twice (the second time is a replay) and matches onnxruntime; a missing weight file gives
    NULL and a message that names it; a short input buffer list is not read past."""
    out = str(tmp_path / "tiny")
    proc = _run([compiler, zoo.BUNDLED_PATH, "-o", out, "--target", "host", "--emit", "lib",
                 "--quiet"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert os.path.isfile(out + ".so") and os.path.isfile(out + ".weights")
    assert not os.path.exists(out), "--emit lib must not also link an executable"
    lib = _load_c_api(out + ".so")

    error = ctypes.create_string_buffer(512)
    missing = str(tmp_path / "missing.weights")
    assert not lib.memopt_model_create(missing.encode(), 0, error, len(error))
    assert missing in error.value.decode(), error.value

    model = lib.memopt_model_create((out + ".weights").encode(), 0, error, len(error))
    assert model, error.value
    try:
        session, inputs = random_inputs(zoo.BUNDLED_PATH,
                                        {n: s for n, (s, _) in zoo.BUNDLED.inputs.items()})
        expected = dict(zip([o.name for o in session.get_outputs()],
                            session.run(None, inputs)))
        assert lib.memopt_model_num_inputs(model) == len(inputs)
        assert lib.memopt_model_num_outputs(model) == len(expected)
        arrays_in = []
        for i in range(len(inputs)):
            name = lib.memopt_model_tensor_name(model, 0, i).decode()
            array = np.ascontiguousarray(inputs[name])
            assert lib.memopt_model_tensor_bytes(model, 0, i) == array.nbytes
            arrays_in.append(array)
        arrays_out, names_out = [], []
        for i in range(len(expected)):
            name = lib.memopt_model_tensor_name(model, 1, i).decode()
            reference = expected[name]
            assert lib.memopt_model_tensor_bytes(model, 1, i) == reference.nbytes
            arrays_out.append(np.zeros_like(reference))
            names_out.append(name)
        in_ptrs = (ctypes.c_void_p * len(arrays_in))(*[a.ctypes.data for a in arrays_in])
        out_ptrs = (ctypes.c_void_p * len(arrays_out))(*[a.ctypes.data for a in arrays_out])
        for run in range(2):
            for array in arrays_out:
                array.fill(0)
            assert lib.memopt_model_run(model, in_ptrs, out_ptrs) == 0, \
                lib.memopt_model_error(model)
            for name, got in zip(names_out, arrays_out):
                reference = expected[name]
                scale = float(np.max(np.abs(reference)))
                assert scale > 0
                error_rel = float(np.max(np.abs(got.astype(np.float64) - reference))) / scale
                assert error_rel < RELATIVE_TOLERANCE, (run, name, error_rel)
    finally:
        lib.memopt_model_destroy(model)


def test_cuda_shared_library_links_with_nvcc(compiler, tmp_path):
    """--target cuda --emit lib builds OUT.so with nvcc against the CUDA runtime library and
    exports the C API (it cannot run without a GPU)."""
    _nvcc()
    out = str(tmp_path / "tiny")
    proc = _run([compiler, zoo.BUNDLED_PATH, "-o", out, "--target", "cuda", "--emit", "lib",
                 "--arch", "sm_90", "--quiet"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    symbols = _run(["nm", "-D", "--defined-only", out + ".so"]).stdout
    for name in ("memopt_model_create", "memopt_model_run", "memopt_model_destroy"):
        assert re.search(rf"\bT {name}\b", symbols), name


def test_cuda_rejects_unknown_arch(compiler, tmp_path):
    proc = _run([compiler, zoo.BUNDLED_PATH, "-o", str(tmp_path / "x"), "--target", "cuda",
                 "--emit", "source", "--arch", "sm_7"])
    assert proc.returncode != 0
    assert "cannot target --arch sm_7" in proc.stderr
