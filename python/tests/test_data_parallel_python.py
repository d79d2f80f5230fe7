"""Data-parallel training through the Python package (docs/python.md, "Data parallel"):
memopt.Training(data_parallel=N, shard=..., reduce_dtype=...) compiles one rank's step of N,
memopt.compile loads it, and Program.train_step takes the global batch; on the host backend
the C API runs the N ranks as N threads of this process (memopt_model_create starts them).

The oracle is the same as test_data_parallel.py's: one rank on the N-times batch, compiled and
trained through the same package. For a mean loss over equal slices, the ranks' averaged
gradient is the whole batch's, so the losses of every step and the final parameters agree
within the rounding of summing the batch in another order (1e-5 relative; bf16 within the
unit roundoff the mixed-precision tests of test_data_parallel.py justify).
"""

import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from conftest import PYTHON_PACKAGES  # noqa: F401 - puts the build's memopt on sys.path
from test_data_parallel import COMPILE, make_convnet, make_mlp, relative_error, run

import memopt

MICRO_BATCH = 2
STEPS = 4
TOLERANCE = 1e-5
PARAMETERS = {"mlp": ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"],
              "convnet": ["conv.weight", "conv.bias", "fc.weight", "fc.bias"]}
MODELS = {"mlp": (make_mlp, (8,), 3), "convnet": (make_convnet, (2, 4, 4), 2)}


def batches(sample_shape, samples, steps, seed=5):
    """`steps` global batches of `samples` samples, different every step."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((samples, *sample_shape)).astype(np.float32),
             rng.integers(0, 3, size=samples).astype(np.int64)) for _ in range(steps)]


def train(program, data):
    return [program.train_step({"x": x, "labels": y}) for x, y in data]


def trained_parameters(program, folder, names):
    """The trained parameters as save() writes them: the whole tensors, gathered from the
    shards under ZeRO-3 (get_weights reads rank 0's region, which holds shards there)."""
    path = os.path.join(folder, "trained.onnx")
    program.save(path)
    model = onnx.load(path)
    found = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return {name: found[name] for name in names}


_REFERENCES = {}


def reference(tmp_path_factory, model, training, global_batch, data, precision="fp32"):
    """One rank on the N-times batch through the package (compiled once per key)."""
    key = (model, repr(training), global_batch, precision)
    if key not in _REFERENCES:
        folder = tmp_path_factory.mktemp(f"python_dp_reference_{model}")
        path = MODELS[model][0](folder / "model.onnx", batch=global_batch)
        program = memopt.compile(path, train=training, precision=precision)
        assert program.ranks == 1 and program.rank == 0
        losses = train(program, data)
        _REFERENCES[key] = (losses, trained_parameters(program, str(folder), PARAMETERS[model]))
    return _REFERENCES[key]


SGD = dict(optimizer="sgd", lr=0.1, momentum=0.9, weight_decay=0.01)
ADAMW = dict(optimizer="adamw", lr=0.01, weight_decay=0.05)


@pytest.mark.parametrize("model,optimizer,shard", [
    ("mlp", "sgd", "none"),
    ("mlp", "adamw", "optimizer"),
    ("mlp", "sgd", "gradients"),
    ("mlp", "adamw", "parameters"),
    ("convnet", "sgd", "optimizer"),
    ("convnet", "adamw", "parameters"),
])
def test_n_host_ranks_through_python_equal_one_rank(tmp_path, tmp_path_factory, model,
                                                    optimizer, shard):
    """Training(data_parallel=N, shard=...) through memopt.compile and train_step on the global
    batch: the same loss at each of 4 steps and the same final parameters as one rank on the
    N-times batch (MLP over 3 ranks: parameters with tails; conv net over 2)."""
    builder, sample_shape, ranks = MODELS[model]
    options = SGD if optimizer == "sgd" else ADAMW
    data = batches(sample_shape, MICRO_BATCH * ranks, STEPS)
    expected_losses, expected = reference(tmp_path_factory, model, memopt.Training(**options),
                                          MICRO_BATCH * ranks, data)
    path = builder(tmp_path / "model.onnx", batch=MICRO_BATCH)
    program = memopt.compile(path, train=memopt.Training(**options, data_parallel=ranks,
                                                         shard=shard))
    assert program.ranks == ranks and program.rank == 0
    # The table is one rank's: the compiled micro-batch.
    assert program.inputs[0].shape[0] == MICRO_BATCH
    losses = train(program, data)
    assert losses == pytest.approx(expected_losses, rel=TOLERANCE), (losses, expected_losses)
    actual = trained_parameters(program, str(tmp_path), PARAMETERS[model])
    errors = {name: relative_error(actual[name], expected[name]) for name in expected}
    assert all(actual[n].shape == expected[n].shape for n in expected)
    assert max(errors.values()) <= TOLERANCE, errors


@pytest.mark.parametrize("reduce_dtype", ["f32", "low"])
def test_bf16_ranks_with_reduce_dtype(tmp_path, tmp_path_factory, reduce_dtype):
    """bf16 over 3 ranks, gradients reduced in f32 or in bf16 (Training.reduce_dtype): the
    first loss within 1e-5 of one bf16 rank on the whole batch, every loss within bf16's unit
    roundoff 2^-8, the parameters within 2 units (why: test_data_parallel.py)."""
    options = dict(optimizer="sgd", lr=0.01, momentum=0.9)
    data = batches((8,), MICRO_BATCH * 3, 6, seed=21)
    expected_losses, expected = reference(tmp_path_factory, "mlp", memopt.Training(**options),
                                          MICRO_BATCH * 3, data, precision="bf16")
    path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    program = memopt.compile(path, precision="bf16", train=memopt.Training(
        **options, data_parallel=3, shard="gradients", reduce_dtype=reduce_dtype))
    losses = np.array(train(program, data))
    errors = np.abs(losses - np.array(expected_losses)) / np.abs(np.array(expected_losses))
    unit = 2.0 ** -8
    assert errors[0] <= 1e-5 and errors.max() <= unit, errors
    actual = trained_parameters(program, str(tmp_path), PARAMETERS["mlp"])
    worst = max(relative_error(actual[n], expected[n]) for n in expected)
    assert worst <= 2 * unit, worst


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("python_dp_three")
    path = make_mlp(folder / "model.onnx", batch=MICRO_BATCH)
    return memopt.compile(path, train=memopt.Training(**SGD, data_parallel=3))


def test_train_step_wants_the_global_batch(three_ranks):
    """One rank's batch (the compiled shape), or any other but 3 x 2 rows, is refused with a
    message naming the input, the per-rank batch and the number of ranks; nothing trains."""
    before = three_ranks.get_weights("parameter")
    x = np.zeros((MICRO_BATCH, 8), np.float32)
    y = np.zeros(MICRO_BATCH, np.int64)
    with pytest.raises(memopt.InputError) as error:
        three_ranks.train_step({"x": x, "labels": y})
    assert str(error.value) == (
        "input 'x' has shape (2, 8); the program expects (6, 8): the global batch of 3 "
        "data-parallel ranks of 2 each (rank r trains on rows [2r, 2(r + 1)) of axis 0)")
    with pytest.raises(memopt.InputError, match=r"input 'labels' has shape \(5,\); the program "
                       r"expects \(6,\): the global batch of 3 data-parallel ranks"):
        three_ranks.train_step({"x": np.zeros((6, 8), np.float32),
                                "labels": np.zeros(5, np.int64)})
    after = three_ranks.get_weights("parameter")
    assert all(np.array_equal(before[n], after[n]) for n in before)
    # The global batch trains.
    loss = three_ranks.train_step({"x": np.ones((6, 8), np.float32),
                                   "labels": np.zeros(6, np.int64)})
    assert np.isfinite(loss)


def test_data_parallel_auto_takes_the_launchers_world_size(tmp_path, monkeypatch):
    """data_parallel='auto' compiles for the launcher's WORLD_SIZE (torchrun), as the
    executable reads it; unset or not a number: one message."""
    path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    monkeypatch.setenv("WORLD_SIZE", "2")
    program = memopt.compile(path, train=memopt.Training(**SGD, data_parallel="auto"))
    # The host backend runs the ranks as threads of this process, whatever RANK says.
    assert program.ranks == 2 and program.rank == 0
    assert program.report["data_parallel"]["ranks"] == 2
    for value, shown in ((None, "not set"), ("two", "'two'"), ("0", "'0'")):
        if value is None:
            monkeypatch.delenv("WORLD_SIZE")
        else:
            monkeypatch.setenv("WORLD_SIZE", value)
        with pytest.raises(memopt.InputError, match=f"data_parallel='auto' takes the number of "
                           f"ranks from the launcher's WORLD_SIZE, which is {shown}"):
            memopt.compile(path, train=memopt.Training(data_parallel="auto"))
    for bad in (1.5, True, [2]):
        with pytest.raises(memopt.InputError, match="expected a number of ranks or 'auto'"):
            memopt.compile(path, train=memopt.Training(data_parallel=bad))


def test_bad_collective_timeout_is_one_message(tmp_path, monkeypatch):
    """MEMOPT_NCCL_TIMEOUT_S bounds a rank's wait in a collective (docs/data-parallel.md, "A
    peer's failure"); a value that is not a number of seconds stops the load with one
    message."""
    path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    workdir = tmp_path / "program"
    memopt.compile(path, train=memopt.Training(**SGD, data_parallel=2), workdir=workdir)
    monkeypatch.setenv("MEMOPT_NCCL_TIMEOUT_S", "soon")
    with pytest.raises(memopt.LoadError, match="MEMOPT_NCCL_TIMEOUT_S='soon' is not a number "
                       r"of seconds \(0 turns the timeout off\)"):
        memopt.load(workdir / "model")
    monkeypatch.setenv("MEMOPT_NCCL_TIMEOUT_S", "30")
    assert memopt.load(workdir / "model").ranks == 2


def test_a_rank_that_does_not_come_times_out_instead_of_hanging(tmp_path, monkeypatch):
    """The host's ranks are threads meeting in every collective: with rank 2 held back
    (MEMOPT_FAULT_LATE_RANK, 2 s before each call) past the timeout (0.2 s), the ranks that
    wait time out, the group is aborted, and the step fails with one message naming the
    collective and the rank that had not come, through the package and through the
    executable, instead of hanging."""
    path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    workdir = tmp_path / "program"
    memopt.compile(path, train=memopt.Training(**SGD, data_parallel=3), workdir=workdir)
    x = np.ones((6, 8), np.float32)
    y = np.zeros(6, np.int64)
    monkeypatch.setenv("MEMOPT_NCCL_TIMEOUT_S", "0.2")
    monkeypatch.setenv("MEMOPT_FAULT_LATE_RANK", "2:2")
    program = memopt.load(workdir / "model")
    with pytest.raises(memopt.ExecutionError, match=r"^rank \d: node '[^']+': \w+ failed: "
                       r"collective timeout: rank [01] waited 0.2 s in \w+ of \d+ elements.* "
                       r"for rank 2 of 3 \(MEMOPT_NCCL_TIMEOUT_S\)"):
        program.train_step({"x": x, "labels": y})

    executable = tmp_path / "step"
    run([COMPILE, path, "--train", "-o", executable, "--quiet", "--data-parallel", 3,
         "--optimizer", "sgd", "--lr", "0.1"])
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    result = run([executable, "--input", f"x={tmp_path / 'x.npy'}", "--input",
                  f"labels={tmp_path / 'y.npy'}", "--steps", 3], check=False, timeout=120)
    assert result.returncode != 0
    assert result.stderr.count("error:") == 1, result.stderr
    assert "collective timeout: rank " in result.stderr, result.stderr
    assert "for rank 2 of 3" in result.stderr, result.stderr
    assert "(MEMOPT_NCCL_TIMEOUT_S)" in result.stderr, result.stderr
