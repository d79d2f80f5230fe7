"""Mixed precision end to end on the host backend: memopt-compile --precision fp16|bf16 builds an
executable whose inputs and outputs stay float32; it runs on the inputs test_e2e_host.py uses and
is compared with onnxruntime in float32.

Tolerance: max |memopt - onnxruntime| / max |onnxruntime| below 20 unit roundoffs of the low
type: 20 * 2^-11 = 9.8e-3 for f16, 20 * 2^-8 = 7.8e-2 for bf16. Measured over the zoo
(bench/precision_bench.py --run, docs/mixed-precision.md): worst 12.0 u for f16 (dynamo/swin_t,
5.8e-3; then torchscript/mobilenet_v3_large, 7.0 u) and 10.8 u for bf16
(torchscript/mobilenet_v3_large, 4.2e-2), every other model below 5.4 u; the generated models
below 3 u. A misplaced cast, a constant converted
wrongly or an overflow gives errors of order 1, far above this bound.

Memory: the --report JSON of each compilation must show the weights halved (exactly for the
bundled model, whose initializers are all float; within 1% of half for the zoo, whose integer
constants and f32-island scalars stay) and a smaller arena (exactly half for the bundled model;
the zoo's arenas also hold f32 outputs and fixed-size GEMM workspaces).

Covered: the seven generated op-family models of test_e2e_host.py (every runtime kernel family,
including the f32 islands of exp, log, pow, mod) and its attention model (fused attention in the
low type), the bundled tiny_convnet, and a subset of the zoo
chosen to cover every op kind the zoo uses while keeping CI time small (about 1 min for this
file on the shared 2-core machine; host runs of resnet50, convnext_tiny or vit_b_16 take 9 to 77 s
each, per precision): torchscript/gpt2_nn (causal mask with -inf through where, erf GELU,
softmax, layer norm, the tied LM head whose matmul stores the f32 logits directly),
torchscript/bert_nn (post-LN blocks, tanh pooler), dynamo/hf_gpt2 (the finfo.min mask clamped
to -65504 in f16; also compiled with --no-fuse-epilogues, where its eight-op tanh GELU keeps pow
as an f32 island),
dynamo/mobilenet_v3_large (depthwise conv, hard_swish, hard_sigmoid, reduce_mean) and
dynamo/efficientnet_b0 (sigmoid gates of the squeeze-excitation blocks). The whole zoo is
measured by bench/precision_bench.py.
"""

import json
import os

import numpy as np
import pytest

import fill_weights
import test_e2e_host as e2e
import zoo
import tiers

UNIT_ROUNDOFF = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
TOLERANCE = {precision: 20 * u for precision, u in UNIT_ROUNDOFF.items()}
PRECISIONS = sorted(UNIT_ROUNDOFF)
# test_e2e_host's op-family models and its attention model (three of its four attentions fuse
# into memopt.attention, which runs in the low type).
GENERATED = dict(e2e.GENERATED, attention=e2e.model_attention)
ZOO_SUBSET = ["torchscript/gpt2_nn", "torchscript/bert_nn", "dynamo/hf_gpt2",
              "dynamo/mobilenet_v3_large", "dynamo/efficientnet_b0"]


def _shape_args(shapes):
    args = []
    for name, shape in shapes.items():
        args += ["--input-shape", f"{name}={'x'.join(str(d) for d in shape)}"]
    return args


def _report(compiler, onnx_path, folder, shapes, precision):
    """The memory report of a planned compilation (no executable)."""
    os.makedirs(folder, exist_ok=True)
    report = os.path.join(folder, f"{precision}.json")
    proc = e2e._run([compiler, onnx_path, "--emit", "plan", "-o",
                     os.path.join(folder, f"{precision}.mlir"), "--precision", precision,
                     "--report", report, "--quiet", *_shape_args(shapes)])
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.load(open(report))


def check_precision(compiler, onnx_path, folder, shapes, precision, flags=()):
    """Compiles with --precision (and `flags`), runs, compares with onnxruntime; returns the
    report and the largest relative error over the float outputs."""
    session, inputs = e2e.random_inputs(onnx_path, shapes)
    expected = session.run(None, inputs)
    names = [o.name for o in session.get_outputs()]
    out_dir = os.path.join(folder, precision)
    os.makedirs(out_dir, exist_ok=True)
    exe = os.path.join(out_dir, "model")
    report_path = os.path.join(out_dir, "memory.json")
    e2e.compile_model(compiler, onnx_path, exe, "--quiet", "--precision", precision,
                      "--report", report_path, *_shape_args(shapes), *flags)
    e2e.run_executable(exe, inputs, out_dir)
    worst = 0.0
    for name, reference in zip(names, expected):
        got = np.load(os.path.join(out_dir, e2e.file_name(name)))
        assert got.shape == reference.shape, (name, got.shape, reference.shape)
        # Outputs keep their types (keep_io_types).
        assert got.dtype == reference.dtype, (name, got.dtype, reference.dtype)
        if reference.dtype.kind in "biu":
            np.testing.assert_array_equal(got, reference, err_msg=name)
            continue
        scale = float(np.max(np.abs(reference)))
        assert scale > 0, f"{name}: the reference output is all zeros"
        assert np.all(np.isfinite(got)), f"{name}: non-finite values"
        error = float(np.max(np.abs(got.astype(np.float64) - reference))) / scale
        assert error < TOLERANCE[precision], (
            f"{precision} output {name}: relative error {error:.3g} >= "
            f"{TOLERANCE[precision]:.3g} ({error / UNIT_ROUNDOFF[precision]:.1f} unit roundoffs)")
        worst = max(worst, error)
    report = json.load(open(report_path))
    assert report["precision"] == {"fp16": "f16", "bf16": "bf16"}[precision]
    return report, worst


@pytest.fixture(scope="session")
def compiler():
    return e2e._tool("memopt-compile")


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_model(name, precision, compiler, tmp_path):
    model = GENERATED[name](np.random.default_rng(len(name)))
    path = str(tmp_path / f"{name}.onnx")
    e2e.onnx.save(model, path)
    check_precision(compiler, path, str(tmp_path), {}, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_bundled_model(precision, compiler, tmp_path):
    shapes = {n: s for n, (s, _) in zoo.BUNDLED.inputs.items()}
    fp32 = _report(compiler, zoo.BUNDLED_PATH, str(tmp_path / "fp32"), shapes, "fp32")
    assert fp32["precision"] == "f32"
    report, _ = check_precision(compiler, zoo.BUNDLED_PATH, str(tmp_path), shapes, precision)
    # Every initializer of the bundled model is a float weight: exactly half.
    assert 2 * report["weights_bytes"] == fp32["weights_bytes"], (report, fp32)
    assert 2 * report["arena_bytes"] <= fp32["arena_bytes"], (report["arena_bytes"],
                                                             fp32["arena_bytes"])
    assert report["io_bytes"] == fp32["io_bytes"]


def _zoo_params():
    params = [pytest.param(zoo.by_id(model_id), precision, (), id=f"{model_id}-{precision}",
                           marks=[] if model_id in tiers.ZOO else [pytest.mark.sweep])
              for model_id in ZOO_SUBSET for precision in PRECISIONS]
    # Without epilogue fusion hf_gpt2's tanh GELU stays eight ops, and its pow runs as an f32
    # island inside an f16/bf16 model.
    params += [pytest.param(zoo.by_id("dynamo/hf_gpt2"), precision, ("--no-fuse-epilogues",),
                            id=f"dynamo/hf_gpt2-unfused-{precision}")
               for precision in PRECISIONS]
    return params


@pytest.fixture(scope="module")
def zoo_fp32(compiler, tmp_path_factory):
    """model id -> (filled ONNX path, fp32 memory report), made once per model."""
    cache = {}

    def get(model):
        if model.id not in cache:
            folder = tmp_path_factory.mktemp(model.name)
            onnx_path = fill_weights.fill(model.path, str(folder / "model"),
                                          log=open(os.devnull, "w"))
            shapes = {name: shape for name, (shape, _) in model.inputs.items()}
            cache[model.id] = (onnx_path, _report(compiler, onnx_path, str(folder / "fp32"),
                                                  shapes, "fp32"))
        return cache[model.id]
    return get


@pytest.mark.parametrize("model,precision,flags", _zoo_params())
def test_zoo_model(model, precision, flags, compiler, zoo_fp32, tmp_path):
    onnx_path, fp32 = zoo_fp32(model)
    shapes = {name: shape for name, (shape, _) in model.inputs.items()}
    report, _ = check_precision(compiler, onnx_path, str(tmp_path), shapes, precision, flags)
    ratio = report["weights_bytes"] / fp32["weights_bytes"]
    assert 0.5 <= ratio < 0.505, f"weights {report['weights_bytes']} vs {fp32['weights_bytes']}"
    # Smaller, not half: the arena also holds the f32 outputs (planned in the arena, kept f32)
    # and cuBLASLt workspaces of at least 1 MiB whatever the precision; for the GPT-2 models
    # the f32 logits and the LM head's workspace are the peak (docs/mixed-precision.md).
    assert report["arena_bytes"] < fp32["arena_bytes"], (report["arena_bytes"],
                                                         fp32["arena_bytes"])


def test_lower_only_refuses_precision(compiler, tmp_path):
    """--precision acts before planning: an already planned input is refused, once."""
    plan = str(tmp_path / "plan.mlir")
    proc = e2e._run([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", plan, "--quiet"])
    assert proc.returncode == 0, proc.stderr
    proc = e2e._run([compiler, plan, "--lower-only", "--precision", "bf16", "-o",
                     str(tmp_path / "x")])
    assert proc.returncode != 0
    assert "--precision bf16 needs the graph before planning" in proc.stderr, proc.stderr
    assert proc.stderr.count("error:") == 1, proc.stderr


# ------------------------------------------------------------------------------------------
# --precision tf32: f32 storage, TF32 math in contractions on CUDA. The host backend computes
# the same program in f32 (double inside), so its outputs must equal the fp32 program's bit for
# bit; the CUDA source must carry the TF32 flag on every f32 contraction and nothing else.
# The TF32 error itself is measured on the GPU (bench/gpu_bench.py, docs/gpu-benchmark.md).


def _host_outputs(compiler, onnx_path, folder, shapes, inputs, *flags):
    exe = os.path.join(folder, "model")
    os.makedirs(folder, exist_ok=True)
    e2e.compile_model(compiler, onnx_path, exe, "--quiet", *_shape_args(shapes), *flags)
    e2e.run_executable(exe, inputs, folder)
    return exe


@pytest.mark.parametrize("model_id", ["bundled", "dynamo/mobilenet_v3_large"])
def test_tf32_host_equals_fp32(model_id, compiler, zoo_fp32, tmp_path):
    if model_id == "bundled":
        onnx_path, model = zoo.BUNDLED_PATH, zoo.BUNDLED
    else:
        model = zoo.by_id(model_id)
        onnx_path, _ = zoo_fp32(model)
    shapes = {n: s for n, (s, _) in model.inputs.items()}
    session, inputs = e2e.random_inputs(onnx_path, shapes)
    names = [o.name for o in session.get_outputs()]
    outputs = {}
    for precision in ("fp32", "tf32"):
        folder = str(tmp_path / precision)
        _host_outputs(compiler, onnx_path, folder, shapes, inputs, "--precision", precision,
                      "--report", os.path.join(folder, "memory.json"))
        outputs[precision] = [np.load(os.path.join(folder, e2e.file_name(n))) for n in names]
        report = json.load(open(os.path.join(folder, "memory.json")))
        assert report["precision"] == {"fp32": "f32", "tf32": "tf32"}[precision]
    for name, a, b in zip(names, outputs["fp32"], outputs["tf32"]):
        assert np.any(a != 0), name
        np.testing.assert_array_equal(a, b, err_msg=name)
    # The same plan: TF32 changes no tensor.
    fp32 = json.load(open(str(tmp_path / "fp32" / "memory.json")))
    tf32 = json.load(open(str(tmp_path / "tf32" / "memory.json")))
    for key in ("arena_bytes", "weights_bytes", "io_bytes", "max_live_bytes"):
        assert fp32[key] == tf32[key], key


def test_tf32_cuda_source_flags_contractions(compiler, tmp_path):
    """Every f32 conv / matmul of the CUDA program asks for TF32; the fp32 program has none."""
    shapes = {n: s for n, (s, _) in zoo.BUNDLED.inputs.items()}
    sources = {}
    for precision in ("fp32", "tf32"):
        out = str(tmp_path / precision / "model")
        proc = e2e._run([compiler, zoo.BUNDLED_PATH, "-o", out, "--target", "cuda", "--emit",
                         "source", "--precision", precision, "--quiet", *_shape_args(shapes)])
        assert proc.returncode == 0, proc.stderr[-3000:]
        sources[precision] = open(out + ".cu").read()
    calls = sources["tf32"].count("  conv(ctx,") + sources["tf32"].count("  matmul(ctx,")
    assert calls > 0
    assert sources["tf32"].count("params.allowTf32 = true;") == calls
    assert "allowTf32" not in sources["fp32"]


def test_tf32_training_step(compiler, tmp_path):
    """--train takes --precision tf32 (the training benchmark's TF32 column): the gradient
    convolutions and matmuls carry the flag on CUDA, and a host step gives the fp32 loss."""
    shapes = {n: s for n, (s, _) in zoo.BUNDLED.inputs.items()}
    rng = np.random.default_rng(5)
    x = str(tmp_path / "x.npy")
    y = str(tmp_path / "y.npy")
    np.save(x, rng.standard_normal((1, 3, 32, 32)).astype(np.float32))
    np.save(y, np.array([4], np.int64))
    losses = {}
    for precision in ("fp32", "tf32"):
        out = str(tmp_path / precision / "train")
        e2e.compile_model(compiler, zoo.BUNDLED_PATH, out, "--train", "--quiet",
                          "--precision", precision, *_shape_args(shapes))
        proc = e2e._run([out, "--input", f"input={x}", "--input", f"labels={y}", "--steps",
                         "2"])
        assert proc.returncode == 0, proc.stderr[-3000:]
        losses[precision] = [line.split()[-1] for line in proc.stdout.splitlines()
                             if line.startswith("step ")]
    assert len(losses["fp32"]) == 2 and losses["fp32"] == losses["tf32"], losses
    source = str(tmp_path / "cuda" / "train")
    proc = e2e._run([compiler, zoo.BUNDLED_PATH, "--train", "-o", source, "--target", "cuda",
                     "--emit", "source", "--precision", "tf32", "--quiet", *_shape_args(shapes)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = open(source + ".cu").read()
    assert "convBackwardFilter(ctx," in text
    assert text.count("params.allowTf32 = true;") >= text.count("convBackwardFilter(ctx,") + \
        text.count("  conv(ctx,")
    # fp16 training is mixed-precision training (test_mixed_training.py), data-parallel too
    # (test_data_parallel.py); a reduce type for a step without low-precision gradients is
    # refused, naming the flags.
    proc = e2e._run([compiler, zoo.BUNDLED_PATH, "--train", "-o", str(tmp_path / "x"),
                     "--precision", "fp16", "--data-parallel", "2", "--emit", "plan"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = e2e._run([compiler, zoo.BUNDLED_PATH, "--train", "-o", str(tmp_path / "y"),
                     "--data-parallel", "2", "--reduce-dtype", "low", "--emit", "plan"])
    assert proc.returncode != 0 and "--reduce-dtype" in proc.stderr, proc.stderr
