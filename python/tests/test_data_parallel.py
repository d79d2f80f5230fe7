"""Data-parallel training on the host backend (memopt-compile --train --data-parallel N,
docs/data-parallel.md): N ranks as N threads of the executable, each on its slice of the
batch, gradients averaged over the ranks (all-reduce), or reduce-scattered with the optimizer
state (ZeRO-1) and the accumulators (ZeRO-2) sharded and the parameters all-gathered.

The oracle is memopt's own one-rank training on the N-times batch: for a mean loss over equal
slices, the average of the ranks' gradients is the gradient of the whole batch, so after K
steps both give the same losses, the same weights and (gathered) the same optimizer state,
within the rounding of summing the batch in another order. The one-rank program is itself
checked against onnxruntime-training and PyTorch's update formulas in test_training.py.

Tolerances: losses 1e-5 relative; weights and optimizer state 1e-5 relative L2 (measured
worst over these cases: see the assertion messages); BatchNormalization's running statistics
stay per rank (rank 0's are saved), checked exactly against numpy.
"""

import ctypes
import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import BUILD_DIR

COMPILE = os.path.join(BUILD_DIR, "bin", "memopt-compile")
LOSS_TOLERANCE = 1e-5
STATE_TOLERANCE = 1e-5


def run(argv, check=True, timeout=600):
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} failed ({result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


def file_name(name):
    """The executable's file name for a tensor (Main.cpp: fileNameFor)."""
    return "".join("_" if c in "/\\: " else c for c in name) + ".npy"


def step_losses(stdout):
    return [float(line.split()[-1]) for line in stdout.splitlines()
            if line.startswith("step ")]


def relative_error(actual, expected):
    expected = expected.astype(np.float64)
    return float(np.linalg.norm(actual.astype(np.float64) - expected) /
                 max(np.linalg.norm(expected), 1e-30))


def save_model(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def make_mlp(path, batch, features=8, hidden=16, classes=3, seed=0):
    """Gemm-Relu-Gemm. Over 3 ranks fc1.weight (128 elements) and fc1.bias (16) have a tail
    (elements % ranks) that every rank updates."""
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
    return save_model(graph, path)


def make_convnet(path, batch, seed=0):
    """Conv(2 -> 4, 3x3, pad 1)-Relu-MaxPool(2)-Flatten-Gemm(16 -> 3) on 2x4x4 images. Over 2
    ranks the classifier's bias (3 elements) has a tail."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((4, 2, 3, 3)) * 0.3).astype(np.float32),
                                "conv.weight"),
        numpy_helper.from_array((rng.standard_normal(4) * 0.1).astype(np.float32),
                                "conv.bias"),
        numpy_helper.from_array((rng.standard_normal((3, 16)) * 0.3).astype(np.float32),
                                "fc.weight"),
        numpy_helper.from_array((rng.standard_normal(3) * 0.1).astype(np.float32), "fc.bias"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                         name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], transB=1,
                         name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         [batch, 2, 4, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 3])], inits)
    return save_model(graph, path)


MODELS = {
    # name: (builder, sample shape, ranks)
    "mlp": (make_mlp, (8,), 3),
    "convnet": (make_convnet, (2, 4, 4), 2),
}
OPTIMIZERS = {
    "sgd": ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9", "--weight-decay",
            "0.01"],
    "adamw": ["--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.05"],
}
PARAMETERS = {"mlp": ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"],
              "convnet": ["conv.weight", "conv.bias", "fc.weight", "fc.bias"]}
STATE_SUFFIXES = {"sgd": [".momentum_buffer"], "adamw": [".exp_avg", ".exp_avg_sq"]}
MICRO_BATCH = 2
STEPS = 3


def data(tmp_path, sample_shape, samples, seed=11):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, *sample_shape)).astype(np.float32)
    y = rng.integers(0, 3, size=samples).astype(np.int64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return str(tmp_path / "x.npy"), str(tmp_path / "y.npy")


def train(executable, x, y, state, *args):
    result = run([executable, "--steps", STEPS, "--input", f"x={x}", "--input", f"labels={y}",
                  "--save-state", state, *args])
    return step_losses(result.stdout), result.stdout


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One-rank training on the N-times batch, compiled and run once per (model, optimizer,
    global batch)."""
    cache = {}

    def get(model, optimizer, global_batch, x, y):
        key = (model, optimizer, global_batch)
        if key not in cache:
            folder = tmp_path_factory.mktemp(f"reference_{model}_{optimizer}_{global_batch}")
            onnx_path = MODELS[model][0](folder / "model.onnx", batch=global_batch)
            out = folder / "step"
            run([COMPILE, onnx_path, "--train", "-o", out, "--quiet", *OPTIMIZERS[optimizer]])
            losses, _ = train(out, x, y, folder / "state")
            cache[key] = (losses, folder / "state")
        return cache[key]

    return get


def compare_state(model, optimizer, state, expected_state, errors):
    for name in PARAMETERS[model]:
        for suffix in [""] + STATE_SUFFIXES[optimizer]:
            actual = np.load(state / file_name(name + suffix))
            expected = np.load(expected_state / file_name(name + suffix))
            assert actual.shape == expected.shape, name + suffix
            errors[name + suffix] = relative_error(actual, expected)
    worst = max(errors, key=errors.get)
    assert errors[worst] <= STATE_TOLERANCE, f"worst {worst}: {errors[worst]:.3g}; {errors}"


@pytest.mark.parametrize("shard", ["none", "optimizer", "gradients"])
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
@pytest.mark.parametrize("model", ["mlp", "convnet"])
def test_n_ranks_equal_one_rank_on_the_n_times_batch(tmp_path, reference, model, optimizer,
                                                     shard):
    """N ranks of micro-batch 2 against one rank of batch 2N: the same loss at every step and
    the same weights and optimizer state (gathered from the shards) after 3 steps. The data
    hold 4N samples, so the steps wrap around and the ranks see different samples each
    step."""
    builder, sample_shape, ranks = MODELS[model]
    x, y = data(tmp_path, sample_shape, 4 * ranks)
    expected_losses, expected_state = reference(model, optimizer, MICRO_BATCH * ranks, x, y)
    onnx_path = builder(tmp_path / "model.onnx", batch=MICRO_BATCH)
    out = tmp_path / "step"
    run([COMPILE, onnx_path, "--train", "-o", out, "--quiet", "--data-parallel", ranks,
         "--shard", shard, *OPTIMIZERS[optimizer]])
    state = tmp_path / "state"
    losses, stdout = train(out, x, y, state)
    assert f"data parallel: {ranks} ranks (threads of this process)" in stdout
    assert losses == pytest.approx(expected_losses, rel=LOSS_TOLERANCE), stdout
    compare_state(model, optimizer, state, expected_state, {})


@pytest.mark.parametrize("shard", ["none", "optimizer", "gradients"])
def test_accumulation_reduces_once_per_step(tmp_path, reference, shard):
    """--accumulate 2 with 2 ranks of micro-batch 2: every optimizer step sees 2 x 2 x 2 = 8
    samples, so it equals one rank on the batch of 8. The collectives of none and optimizer
    are gated on the last micro-step (the accumulators sum locally); gradients reduces every
    micro-batch into shard-sized accumulators."""
    ranks = 2
    x, y = data(tmp_path, (8,), 16, seed=5)
    expected_losses, expected_state = reference("mlp", "sgd", 8, x, y)
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    out = tmp_path / "step"
    report = tmp_path / "report.json"
    run([COMPILE, onnx_path, "--train", "-o", out, "--quiet", "--data-parallel", ranks,
         "--shard", shard, "--accumulate", 2, "--report", report, *OPTIMIZERS["sgd"]])
    state = tmp_path / "state"
    losses, stdout = train(out, x, y, state)
    assert losses == pytest.approx(expected_losses, rel=LOSS_TOLERANCE), stdout
    compare_state("mlp", "sgd", state, expected_state, {})
    dp = json.load(open(report))["data_parallel"]
    parameters = 4 * (16 * 8 + 16 + 3 * 16 + 3)
    shards = 4 * (64 + 8 + 24 + (1 + 1))  # chunk (+ tail) of each parameter over 2 ranks
    accumulators = dp["per_rank"]["gradient_accumulator_bytes"]
    assert accumulators == (shards if shard == "gradients" else parameters)
    assert dp["unsharded_gradient_accumulator_bytes"] == parameters
    # Bytes each rank sends per optimizer step (ring volumes over 2 ranks: half the data):
    # DDP all-reduces the accumulated gradients once (twice their half); ZeRO-1
    # reduce-scatters them once and all-gathers the parameters; ZeRO-2 reduce-scatters
    # every micro-batch.
    half = parameters // 2
    assert dp["sent_bytes_per_step"] == {"none": 2 * half, "optimizer": 2 * half,
                                         "gradients": 3 * half}[shard]


def test_report_per_rank_bytes(tmp_path):
    """The report's data_parallel section: per-rank parameters (whole), optimizer state
    (AdamW's two moments: whole with shard none, one shard each with ZeRO-1), and the
    communication buffers (none with an in-place all-reduce, the shards with
    reduce-scatter); the executable prints the same per-rank figures."""
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    parameters = 4 * (16 * 8 + 16 + 3 * 16 + 3)
    # Shard elements over 3 ranks: chunk + tail of 128, 16, 48 and 3 elements.
    shard = 4 * ((42 + 2) + (5 + 1) + (16 + 0) + (1 + 0))
    figures = {}
    for mode in ["none", "optimizer"]:
        report = tmp_path / f"{mode}.json"
        out = tmp_path / mode
        run([COMPILE, onnx_path, "--train", "-o", out, "--quiet", "--data-parallel", 3,
             "--shard", mode, "--report", report, *OPTIMIZERS["adamw"]])
        dp = json.load(open(report))["data_parallel"]
        assert dp["ranks"] == 3 and dp["shard"] == mode
        per_rank = dp["per_rank"]
        assert per_rank["parameter_bytes"] == parameters
        assert dp["unsharded_optimizer_state_bytes"] == 2 * parameters
        figures[mode] = per_rank
        x, y = data(tmp_path, (8,), 6)
        _, stdout = train(out, x, y, tmp_path / f"{mode}_state")
        assert f"per rank: arena_bytes={per_rank['arena_bytes']} weight_bytes=" in stdout
        assert (f"parameter_bytes={parameters} "
                f"optimizer_state_bytes={per_rank['optimizer_state_bytes']} ") in stdout
    assert figures["none"]["optimizer_state_bytes"] == 2 * parameters
    assert figures["none"]["communication_buffer_bytes"] == 0
    assert figures["none"]["gradient_bytes"] > 0
    assert figures["optimizer"]["optimizer_state_bytes"] == 2 * shard
    assert figures["optimizer"]["communication_buffer_bytes"] >= shard


def make_batch_norm_net(path, batch):
    """BatchNormalization on the input (2 channels), then a classifier."""
    inits = [
        numpy_helper.from_array(np.array([1.0, 0.5], np.float32), "bn.weight"),
        numpy_helper.from_array(np.array([0.0, 0.1], np.float32), "bn.bias"),
        numpy_helper.from_array(np.array([0.2, -0.1], np.float32), "bn.running_mean"),
        numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "bn.running_var"),
        numpy_helper.from_array(np.full((3, 18), 0.1, np.float32), "fc.weight"),
    ]
    nodes = [
        helper.make_node("BatchNormalization", ["x", "bn.weight", "bn.bias",
                                                "bn.running_mean", "bn.running_var"], ["b"],
                         momentum=0.9, name="bn"),
        helper.make_node("Flatten", ["b"], ["f"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["f", "fc.weight"], ["logits"], transB=1, name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 2, 3, 3])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 3])], inits)
    return save_model(graph, path)


def test_batch_norm_statistics_stay_per_rank(tmp_path):
    """As PyTorch DDP without SyncBatchNorm: each rank normalizes with its own slice's
    statistics and updates its own running statistics; the saved ones are rank 0's (DDP
    broadcasts rank 0's buffers). After one step of 2 ranks the running mean is ONNX's
    momentum update with the mean of rank 0's two samples, not of all four."""
    x, y = data(tmp_path, (2, 3, 3), 4, seed=3)
    onnx_path = make_batch_norm_net(tmp_path / "bn.onnx", batch=MICRO_BATCH)
    out = tmp_path / "step"
    run([COMPILE, onnx_path, "--train", "-o", out, "--quiet", "--bn-batch-stats",
         "--data-parallel", 2, "--shard", "optimizer", "--lr", "0.1"])
    state = tmp_path / "state"
    run([out, "--steps", 1, "--input", f"x={x}", "--input", f"labels={y}",
         "--save-state", state])
    samples = np.load(x).astype(np.float64)
    rank0 = samples[:MICRO_BATCH].mean(axis=(0, 2, 3))
    everything = samples.mean(axis=(0, 2, 3))
    expected = 0.9 * np.array([0.2, -0.1]) + 0.1 * rank0
    running = np.load(state / file_name("bn.running_mean"))
    np.testing.assert_allclose(running, expected, rtol=1e-6, atol=1e-7)
    assert not np.allclose(running, 0.9 * np.array([0.2, -0.1]) + 0.1 * everything,
                           rtol=1e-3)


#===------------------------------------------------------------------------------------===#
# Bad input: one clear message, a non-zero exit, nothing written
#===------------------------------------------------------------------------------------===#


@pytest.mark.parametrize("args, message", [
    (["--data-parallel", "0"], "--data-parallel 0: the step needs at least 1 rank"),
    (["--data-parallel", "-2"], "--data-parallel -2: the step needs at least 1 rank"),
    (["--shard", "optimizer"],
     "--shard optimizer needs --data-parallel N (the ranks the optimizer state is sharded "
     "over)"),
    (["--data-parallel", "2", "--shard", "zero3"],
     "--shard 'zero3' is not none, optimizer, gradients or parameters"),
])
def test_bad_compile_options(tmp_path, args, message):
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    result = run([COMPILE, onnx_path, "--train", "-o", tmp_path / "bad", "--quiet", *args],
                 check=False)
    assert result.returncode != 0
    assert result.stderr.count("error:") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "bad").exists()
    assert not (tmp_path / "bad.cpp").exists()


def test_data_parallel_needs_train(tmp_path):
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    result = run([COMPILE, onnx_path, "-o", tmp_path / "bad", "--quiet", "--data-parallel",
                  "2"], check=False)
    assert result.returncode != 0
    assert "--data-parallel needs --train" in result.stderr, result.stderr
    assert not (tmp_path / "bad").exists()


@pytest.fixture(scope="module")
def two_rank_program(tmp_path_factory):
    folder = tmp_path_factory.mktemp("two_ranks")
    onnx_path = make_mlp(folder / "model.onnx", batch=MICRO_BATCH)
    out = folder / "step"
    run([COMPILE, onnx_path, "--train", "-o", out, "--quiet", "--data-parallel", 2, "--shard",
         "optimizer", "--momentum", "0.9"])
    x, y = data(folder, (8,), 8)
    return out, x, y


@pytest.mark.parametrize("args, message", [
    (["--batch-size", "5"], "--batch-size 5 does not split over 2 data-parallel ranks"),
    (["--batch-size", "6"],
     "--batch-size 6 does not match the compiled batch size 2 ranks x 2 = 4"),
    (["--ranks", "3"], "--ranks 3: the program was compiled for 2 data-parallel ranks"),
    (["--ranks", "0"], "--ranks expects a number of ranks from 1 to 1024, got '0'"),
])
def test_bad_run_options(tmp_path, two_rank_program, args, message):
    out, x, y = two_rank_program
    result = run([out, "--steps", 1, "--input", f"x={x}", "--input", f"labels={y}",
                  "--save-state", tmp_path / "state", *args], check=False)
    assert result.returncode != 0
    assert result.stderr.count("error:") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "state").exists()


def test_ranks_on_a_single_process_program(tmp_path):
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    out = tmp_path / "step"
    run([COMPILE, onnx_path, "--train", "-o", out, "--quiet"])
    x, y = data(tmp_path, (8,), 4)
    result = run([out, "--steps", 1, "--input", f"x={x}", "--input", f"labels={y}",
                  "--ranks", 2], check=False)
    assert result.returncode != 0
    assert "the program was not compiled for data parallelism" in result.stderr, result.stderr


def test_c_api_runs_the_ranks(tmp_path):
    """The shared library's C API starts the program's ranks itself: memopt_model_ranks says
    2, and one memopt_model_train_step on the global batch (both ranks' micro-batches back to
    back) gives the executable's first loss."""
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    args = ["--train", "--quiet", "--data-parallel", 2, "--shard", "gradients",
            "--momentum", "0.9"]
    run([COMPILE, onnx_path, "-o", tmp_path / "lib", "--emit", "lib", *args])
    run([COMPILE, onnx_path, "-o", tmp_path / "exe", *args])
    x, y = data(tmp_path, (8,), 4)
    (expected,) = train(tmp_path / "exe", x, y, tmp_path / "state")[0][:1]

    lib = ctypes.CDLL(str(tmp_path / "lib.so"))
    lib.memopt_model_create.restype = ctypes.c_void_p
    lib.memopt_model_create.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p,
                                        ctypes.c_size_t]
    lib.memopt_model_ranks.argtypes = [ctypes.c_void_p]
    lib.memopt_model_train_step.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                            ctypes.c_float, ctypes.POINTER(ctypes.c_float)]
    lib.memopt_model_error.restype = ctypes.c_char_p
    lib.memopt_model_error.argtypes = [ctypes.c_void_p]
    lib.memopt_model_destroy.argtypes = [ctypes.c_void_p]
    error = ctypes.create_string_buffer(512)
    model = lib.memopt_model_create(str(tmp_path / "lib.weights").encode(), 0, error, 512)
    assert model, error.value
    try:
        assert lib.memopt_model_ranks(model) == 2
        xs = np.ascontiguousarray(np.load(x))
        ys = np.ascontiguousarray(np.load(y))
        inputs = (ctypes.c_void_p * 2)(xs.ctypes.data, ys.ctypes.data)
        loss = ctypes.c_float()
        status = lib.memopt_model_train_step(model, inputs, -1.0, ctypes.byref(loss))
        assert status == 0, lib.memopt_model_error(model)
        assert loss.value == pytest.approx(expected, rel=1e-6)
    finally:
        lib.memopt_model_destroy(model)


def test_a_failing_rank_stops_every_rank(tmp_path, two_rank_program):
    """A label out of range in rank 1's slice only: rank 1's loss kernel fails, its abort
    releases rank 0 from the collective it waits in, and the executable reports rank 1's
    error once and exits non-zero instead of hanging."""
    out, x, _ = two_rank_program
    labels = tmp_path / "labels.npy"
    np.save(labels, np.array([0, 1, 2, 7, 0, 1, 2, 0], np.int64))
    result = run([out, "--steps", 1, "--input", f"x={x}", "--input", f"labels={labels}",
                  "--save-state", tmp_path / "state"], check=False, timeout=120)
    assert result.returncode != 0
    assert result.stderr.count("error:") == 1, result.stderr
    assert "error: rank 1: node 'loss': label 7 of row 1 is outside [0, 3)" in result.stderr
    assert not (tmp_path / "state").exists()


#===------------------------------------------------------------------------------------===#
# Mixed precision across ranks (--precision fp16|bf16 with --data-parallel N)
#===------------------------------------------------------------------------------------===#

# The N-rank step and the one-rank step on the N-times batch round differently: a rank's f16
# weight gradient sums its own micro-batch and is rounded to f16 before the ranks' average,
# the one-rank gradient sums the whole batch and is rounded once (over 3 ranks the loss seed
# scale / (2 x 3) is no power of two either, so even the output gradients round differently).
# The gradients, and so the momentum buffers, differ by up to one rounding of the low type
# (unit roundoff u = 2^-11 in f16, 2^-8 in bf16), the f32 masters by lr times that, and where
# a master lands on the other side of a rounding boundary its f16 / bf16 copy differs by one
# unit in the last place: from the second step on the forwards differ by such flips. So the
# fp32 tests' 1e-5 holds for the first step only (the same weights: the same forward); after
# it the losses are held to one unit roundoff u of the low type, the weights and momentum
# buffers to 2 u (a gradient element carries a rounding on each side: up to u of the ranks'
# partial sums, up to u of the whole batch's). Measured worst over these cases: see the
# docs (docs/data-parallel.md, Tests).
MIXED_STEPS = 6
MIXED_OPTIMIZER = ["--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9"]
# A rank's gradients are N times the whole batch's (its loss is the mean over its own micro-
# batch, as in DDP), so at GradScaler's 65536 a rank of this MLP may overflow where one rank
# on the whole batch does not; the tests start at 1024 so that only their planted overflow
# skips a step.
SCALE_INIT = ["--loss-scale-init", "1024"]


def mixed_flags(precision):
    return ["--precision", precision, *MIXED_OPTIMIZER,
            *(SCALE_INIT if precision == "fp16" else [])]
# Unit roundoff of each low type.
UNIT = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}


def scaled_rows(stdout):
    """(loss, loss scale or None, skipped?) of each `step N loss L [loss_scale S ...]` line."""
    rows = []
    for line in stdout.splitlines():
        if line.startswith("step "):
            words = line.split()
            scale = float(words[5]) if len(words) > 5 and words[4] == "loss_scale" else None
            rows.append((float(words[3]), scale, "update skipped" in line))
    return rows


@pytest.fixture(scope="module")
def mixed_reference(tmp_path_factory):
    """One rank of the same precision on the N-times batch (compiled once per key)."""
    cache = {}

    def get(precision, global_batch, x, y, steps, extra=()):
        key = (precision, global_batch, x, y, steps, tuple(extra))
        if key not in cache:
            folder = tmp_path_factory.mktemp(f"mixed_reference_{precision}_{global_batch}")
            onnx_path = make_mlp(folder / "model.onnx", batch=global_batch)
            out = folder / "step"
            run([COMPILE, onnx_path, "--train", "-o", out, "--quiet",
                 *mixed_flags(precision), *extra])
            result = run([out, "--steps", steps, "--input", f"x={x}", "--input", f"labels={y}",
                          "--save-state", folder / "state"])
            cache[key] = (scaled_rows(result.stdout), folder / "state")
        return cache[key]

    return get


def compare_mixed_state(state, expected_state, tolerance):
    errors = {}
    for name in PARAMETERS["mlp"]:
        for suffix in ["", ".momentum_buffer"]:
            actual = np.load(state / file_name(name + suffix))
            expected = np.load(expected_state / file_name(name + suffix))
            assert actual.shape == expected.shape, name + suffix
            errors[name + suffix] = relative_error(actual, expected)
    worst = max(errors, key=errors.get)
    assert errors[worst] <= tolerance, f"worst {worst}: {errors[worst]:.3g}; {errors}"
    return errors


@pytest.mark.parametrize("reduce_dtype", ["f32", "low"])
@pytest.mark.parametrize("shard", ["none", "optimizer", "gradients"])
@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_mixed_precision_n_ranks_track_one_rank(tmp_path, mixed_reference, precision, ranks,
                                                shard, reduce_dtype):
    """fp16 (dynamic loss scaling) and bf16 steps over 2 and 3 ranks, every shard mode,
    gradients reduced in f32 or in the low type: the same loss scale on every rank after
    every step (the executable checks it, and that the ranks' parameters agree bit for bit),
    and losses and weights within the tolerances above of one rank on the whole batch."""
    x, y = data(tmp_path, (8,), MICRO_BATCH * ranks * MIXED_STEPS, seed=21)
    expected_rows, expected_state = mixed_reference(precision, MICRO_BATCH * ranks, x, y,
                                                    MIXED_STEPS)
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    out = tmp_path / "step"
    run([COMPILE, onnx_path, "--train", "-o", out, "--quiet", *mixed_flags(precision),
         "--data-parallel", ranks, "--shard", shard, "--reduce-dtype", reduce_dtype])
    state = tmp_path / "state"
    result = run([out, "--steps", MIXED_STEPS, "--input", f"x={x}", "--input", f"labels={y}",
                  "--save-state", state])
    rows = scaled_rows(result.stdout)
    assert len(rows) == MIXED_STEPS, result.stdout
    # The scale and the skips as one rank on the whole batch has them.
    assert [r[1:] for r in rows] == [r[1:] for r in expected_rows], result.stdout
    if precision == "fp16":
        assert rows[0][1] == 1024
    losses = np.array([r[0] for r in rows])
    expected = np.array([r[0] for r in expected_rows])
    errors = np.abs(losses - expected) / np.abs(expected)
    assert errors[0] <= 1e-5 and errors.max() <= UNIT[precision], (
        f"relative loss errors {errors}: {losses} vs {expected}")
    compare_mixed_state(state, expected_state, 2 * UNIT[precision])


def overflow_data(tmp_path, ranks, steps, rank, step):
    """Samples for `steps` steps of `ranks` ranks of micro-batch 2; one sample of rank `rank`'s
    slice of step `step` (1-based) is scaled to 3000: its forward stays finite in f16 (hidden
    values near 1500), but its scaled weight gradients overflow (dW2 = dlogits x relu(h), about
    1024 / 6 x 1500 = 2.6e5 even over the whole batch of 3 ranks)."""
    x, y = data(tmp_path, (8,), MICRO_BATCH * ranks * steps, seed=23)
    samples = np.load(x)
    samples[(step - 1) * MICRO_BATCH * ranks + rank * MICRO_BATCH] *= 3000.0 / np.abs(
        samples[(step - 1) * MICRO_BATCH * ranks + rank * MICRO_BATCH]).max()
    np.save(x, samples)
    return x, y


@pytest.mark.parametrize("shard", ["none", "optimizer", "gradients"])
@pytest.mark.parametrize("ranks", [2, 3])
def test_one_rank_overflowing_skips_the_step_on_every_rank(tmp_path, mixed_reference, ranks,
                                                           shard):
    """fp16: the last rank alone overflows at step 2 (one of its samples is large). Its
    found_inf is 1, the others' 0; the all-reduce (max) of the flag makes every rank skip
    step 2 and halve the scale, as one rank on the whole batch does: the executable checks
    after every step that every rank has the same scale and skipped-step count, and at the
    end that the parameters agree bit for bit. The weights after step 2 are those after
    step 1 and the losses follow the one-rank run."""
    steps = 5
    x, y = overflow_data(tmp_path, ranks, steps, rank=ranks - 1, step=2)
    expected_rows, _ = mixed_reference("fp16", MICRO_BATCH * ranks, x, y, steps)
    assert [r[2] for r in expected_rows] == [False, True, False, False, False], expected_rows
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    out = tmp_path / "step"
    run([COMPILE, onnx_path, "--train", "-o", out, "--quiet", *mixed_flags("fp16"),
         "--data-parallel", ranks, "--shard", shard])
    result = run([out, "--steps", steps, "--input", f"x={x}", "--input", f"labels={y}",
                  "--save-state", tmp_path / "state"])
    rows = scaled_rows(result.stdout)
    assert [r[2] for r in rows] == [False, True, False, False, False], result.stdout
    assert [r[1] for r in rows] == [1024, 512, 512, 512, 512], result.stdout
    assert "loss scale 512 after 5 steps, 1 skipped" in result.stdout
    assert np.load(tmp_path / "state" / "memopt.loss_scale_state.npy").tolist() == [3, 1]
    losses = np.array([r[0] for r in rows])
    expected = np.array([r[0] for r in expected_rows])
    errors = np.abs(losses - expected) / np.abs(expected)
    assert errors[:2].max() <= 1e-5 and errors.max() <= UNIT["fp16"], (losses, expected)
    # The skipped step wrote nothing: the weights after steps 1 and 2 are the same.
    after = {}
    for count in (1, 2):
        run([out, "--steps", count, "--input", f"x={x}", "--input", f"labels={y}",
             "--save-state", tmp_path / f"after{count}"])
        after[count] = {n: np.load(tmp_path / f"after{count}" / file_name(n))
                        for n in PARAMETERS["mlp"]}
    for name in PARAMETERS["mlp"]:
        np.testing.assert_array_equal(after[1][name], after[2][name])


@pytest.mark.parametrize("shard, reduce_dtype", [("none", "f32"), ("gradients", "low")])
def test_mixed_precision_accumulation(tmp_path, mixed_reference, shard, reduce_dtype):
    """fp16 with --accumulate 2 over 2 ranks against one rank on the batch of 8: the overflow
    flag covers the accumulators (ZeRO-2's are shards) and is reduced once per optimizer
    step."""
    x, y = data(tmp_path, (8,), 8 * MIXED_STEPS, seed=25)
    expected_rows, expected_state = mixed_reference("fp16", 8, x, y, MIXED_STEPS)
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    out = tmp_path / "step"
    run([COMPILE, onnx_path, "--train", "-o", out, "--quiet", *mixed_flags("fp16"),
         "--data-parallel", 2, "--shard", shard, "--reduce-dtype", reduce_dtype,
         "--accumulate", 2])
    result = run([out, "--steps", MIXED_STEPS, "--input", f"x={x}", "--input", f"labels={y}",
                  "--save-state", tmp_path / "state"])
    rows = scaled_rows(result.stdout)
    assert [r[1:] for r in rows] == [r[1:] for r in expected_rows], result.stdout
    losses = np.array([r[0] for r in rows])
    expected = np.array([r[0] for r in expected_rows])
    errors = np.abs(losses - expected) / np.abs(expected)
    assert errors[0] <= 1e-5 and errors.max() <= UNIT["fp16"], (losses, expected)
    compare_mixed_state(tmp_path / "state", expected_state, 2 * UNIT["fp16"])


def test_mixed_precision_report_and_bytes_sent(tmp_path):
    """The report's bytes sent per step: gradients reduced in f16 send half of f32's, and the
    overflow flag adds one f32 all-reduce; the pipeline says where the flag is reduced."""
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    sent = {}
    for reduce_dtype in ("f32", "low"):
        report = tmp_path / f"{reduce_dtype}.json"
        result = run([COMPILE, onnx_path, "--train", "-o", tmp_path / reduce_dtype,
                      "--emit", "plan", "--precision", "fp16", "--data-parallel", 2,
                      "--reduce-dtype", reduce_dtype, "--report", report])
        assert ("the overflow flag all-reduced (max): every rank skips the same steps"
                in result.stdout), result.stdout
        plan = open(tmp_path / reduce_dtype).read()
        assert 'reduction = "max"' in plan
        sent[reduce_dtype] = json.load(open(report))["data_parallel"]["sent_bytes_per_step"]
    parameters = 4 * (16 * 8 + 16 + 3 * 16 + 3)
    flag = 2 * 4 // 2  # an all-reduce of one f32 over 2 ranks
    assert sent == {"f32": parameters + flag, "low": parameters // 2 + flag}


@pytest.mark.parametrize("args, message", [
    (["--precision", "fp16", "--data-parallel", "2", "--reduce-dtype", "f8"],
     "--reduce-dtype 'f8' is not f32 or low"),
    (["--precision", "fp16", "--reduce-dtype", "low"],
     "--reduce-dtype low needs --data-parallel N"),
    (["--data-parallel", "2", "--reduce-dtype", "low"],
     "--reduce-dtype low needs --precision fp16 or bf16"),
    (["--precision", "bf16", "--data-parallel", "2", "--reduce-dtype", "low", "--accumulate",
      "2"], "reduce-dtype low cannot reduce the f32 gradient accumulator of shard none"),
])
def test_bad_reduce_dtype(tmp_path, args, message):
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    result = run([COMPILE, onnx_path, "--train", "-o", tmp_path / "bad", "--quiet", *args],
                 check=False)
    assert result.returncode != 0
    assert result.stderr.count("error:") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "bad").exists()
