"""memopt.fit / memopt-compile --fit (docs/fit.md) and the start-up memory check, on the host.

- the chosen configuration fits the limit (planned and as loaded: arena + weight region + inputs)
  and is the fastest predicted of the configurations that fit; the search bisects, so it plans
  fewer configurations than there are micro-batches x precisions;
- trained on the host, it gives the same losses as the plain program compiled with that
  micro-batch and accumulation (memopt.compile of the model at that batch, Training(accumulate));
- a limit nothing meets: one message with the smallest footprint, nothing written;
- --fit auto reads MEMOPT_DEVICE_FREE_BYTES where there is no GPU;
- loading a program on a device with less free memory than it needs (MEMOPT_DEVICE_FREE_BYTES)
  fails at load, saying how much is missing.
"""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

GLOBAL_BATCH = 256
FEATURES, HIDDEN, CLASSES = 32, 256, 10


@pytest.fixture(scope="module")
def memopt(memopt_package):
    return memopt_package


def make_mlp(path, batch, seed=3):
    """x [batch, 32] -> Gemm 256 -> Relu -> Gemm 256 -> Relu -> Gemm 10, with a fixed batch
    (the fit re-batches it)."""
    rng = np.random.default_rng(seed)
    dims = [FEATURES, HIDDEN, HIDDEN, CLASSES]
    inits, nodes, current = [], [], "x"
    for i in range(3):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((dims[i + 1], dims[i])) / np.sqrt(dims[i])).astype(np.float32),
            f"fc{i}.weight"))
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(dims[i + 1]) * 0.1).astype(np.float32), f"fc{i}.bias"))
        out = "logits" if i == 2 else f"h{i}"
        nodes.append(helper.make_node("Gemm", [current, f"fc{i}.weight", f"fc{i}.bias"], [out],
                                      transB=1, name=f"fc{i}"))
        if i < 2:
            nodes.append(helper.make_node("Relu", [out], [f"r{i}"], name=f"relu{i}"))
            current = f"r{i}"
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, FEATURES])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def training(memopt, accumulate=1):
    return memopt.Training(optimizer="adamw", lr=0.01, accumulate=accumulate)


def chosen_point(fit):
    assert fit["chosen"] is not None
    return fit["points"][fit["chosen"]]


def loaded_bytes(program):
    """What the loaded program holds on the device: arena, weight region, its inputs."""
    inputs = sum(int(np.prod(info.shape)) * np.dtype(info.dtype).itemsize
                 for info in program.inputs)
    return program.arena_bytes + program.weight_bytes + inputs


@pytest.fixture(scope="module")
def roomy(memopt, tmp_path_factory):
    """The fit with room for everything: the whole batch in one micro-batch."""
    folder = tmp_path_factory.mktemp("fit")
    model = make_mlp(folder / "mlp.onnx", batch=8)
    program = memopt.fit(model, 1 << 30, global_batch=GLOBAL_BATCH, train=training(memopt),
                         workdir=folder / "roomy")
    program.workdir = str(folder / "roomy")
    return model, program


def test_roomy_limit_takes_the_whole_batch(roomy):
    _, program = roomy
    fit = program.report["fit"]
    chosen = chosen_point(fit)
    assert (chosen["micro_batch"], chosen["accumulate"]) == (GLOBAL_BATCH, 1)
    assert chosen["arena_budget_bytes"] == 0 and chosen["recomputations"] == 0
    # The whole batch, then a bisection over the 8 other divisors of 256: 1 + 4 plans.
    assert len(fit["points"]) == 5
    assert fit["limit_bytes"] == 1 << 30 and fit["global_batch"] == GLOBAL_BATCH
    assert "roofline" in fit["time_source"]
    # The plan is the program: what it loaded is what the search counted.
    assert loaded_bytes(program) == chosen["device_bytes"]


def test_fit_chooses_the_fastest_configuration_that_fits(memopt, roomy, tmp_path):
    model, whole = roomy
    limit = chosen_point(whole.report["fit"])["device_bytes"] - 1
    program = memopt.fit(model, limit, global_batch=GLOBAL_BATCH, train=training(memopt),
                         precisions=["fp32", "bf16"], workdir=tmp_path)
    fit = program.report["fit"]
    chosen = chosen_point(fit)
    assert chosen["fits"] and chosen["device_bytes"] <= limit
    assert loaded_bytes(program) <= limit
    fitting = [point for point in fit["points"] if point["fits"]]
    assert chosen["samples_per_second"] == max(point["samples_per_second"] for point in fitting)
    assert all(point["device_bytes"] <= limit for point in fitting)
    assert all(point["device_bytes"] > limit for point in fit["points"]
               if point["planned"] and not point["fits"])
    # Both precisions searched; the Pareto front is marked and holds the chosen point.
    assert {point["choices"]["precision"] for point in fit["points"]} == {"fp32", "bf16"}
    assert chosen["pareto"]
    # Predicted samples/s is the global batch over the step time.
    k = chosen["accumulate"]
    assert chosen["step_seconds"] == pytest.approx(
        k * (chosen["micro_step_seconds"] - chosen["update_seconds"]) +
        (k - 1) * chosen["accumulate_seconds"] + chosen["update_seconds"])
    assert (chosen["update_seconds"] > 0) == (k > 1)
    assert chosen["samples_per_second"] == pytest.approx(GLOBAL_BATCH / chosen["step_seconds"])


def test_chosen_configuration_trains_like_the_plain_program(memopt, roomy, tmp_path):
    """The fit's program against memopt.compile of the model at the chosen micro-batch with
    Training(accumulate=K): the same losses, micro-batch by micro-batch, over three optimizer
    steps (fp32 only, so both compute the same way)."""
    model, whole = roomy
    limit = chosen_point(whole.report["fit"])["device_bytes"] - 1
    program = memopt.fit(model, limit, global_batch=GLOBAL_BATCH, train=training(memopt),
                         workdir=tmp_path / "fit")
    chosen = chosen_point(program.report["fit"])
    micro, accumulate = chosen["micro_batch"], chosen["accumulate"]
    assert micro * accumulate == GLOBAL_BATCH and micro < GLOBAL_BATCH or \
        chosen["arena_budget_bytes"] > 0
    plain_model = make_mlp(tmp_path / "plain.onnx", batch=micro)
    plain = memopt.compile(plain_model, train=training(memopt, accumulate),
                           memory_budget=chosen["arena_budget_bytes"] or None,
                           workdir=tmp_path / "plain")
    rng = np.random.default_rng(11)
    # One global batch, split into the chosen micro-batches, for three optimizer steps.
    batches = [{"x": rng.standard_normal((micro, FEATURES)).astype(np.float32),
                "labels": rng.integers(0, CLASSES, micro).astype(np.int64)}
               for _ in range(accumulate)]
    fitted_losses, plain_losses = [], []
    for _ in range(3):
        for batch in batches:
            fitted_losses.append(program.train_step(batch))
            plain_losses.append(plain.train_step(batch))
    assert np.all(np.isfinite(fitted_losses))
    np.testing.assert_array_equal(fitted_losses, plain_losses)
    assert sum(fitted_losses[-accumulate:]) < sum(fitted_losses[:accumulate])


def test_impossible_limit_says_the_smallest_footprint(memopt, roomy, tmp_path):
    model, _ = roomy
    with pytest.raises(memopt.CompileError) as error:
        memopt.fit(model, 4096, global_batch=GLOBAL_BATCH, train=training(memopt),
                   workdir=tmp_path)
    message = str(error.value)
    assert "no configuration fits in --fit 4.00 KiB (4096 bytes) of device memory" in message
    assert "the smallest whole-step footprint found is" in message
    assert "micro-batch 1 x 256" in message
    assert not [name for name in os.listdir(tmp_path) if not name.endswith(".onnx")]


def test_fit_auto_reads_the_stated_free_memory(memopt, roomy, tmp_path, monkeypatch):
    model, whole = roomy
    limit = chosen_point(whole.report["fit"])["device_bytes"] - 1
    monkeypatch.setenv("MEMOPT_DEVICE_FREE_BYTES", str(limit))
    program = memopt.fit(model, "auto", global_batch=GLOBAL_BATCH, train=training(memopt),
                         workdir=tmp_path)
    fit = program.report["fit"]
    assert fit["limit_bytes"] == limit
    assert chosen_point(fit)["device_bytes"] <= limit


def test_bad_arguments(memopt, roomy):
    model, _ = roomy
    with pytest.raises(memopt.InputError, match="global_batch 0"):
        memopt.fit(model, "1GiB", global_batch=0, train=training(memopt))
    with pytest.raises(memopt.InputError, match="fit chooses the accumulation"):
        memopt.fit(model, "1GiB", global_batch=8, train=training(memopt, accumulate=2))
    with pytest.raises(memopt.InputError, match="precision 'fp8'"):
        memopt.fit(model, "1GiB", global_batch=8, precisions=["fp8"], train=training(memopt))
    with pytest.raises(memopt.InputError, match="memory 'lots'|not a size"):
        memopt.fit(model, "lots", global_batch=8, train=training(memopt))


def test_load_checks_the_device_has_the_memory(memopt, roomy, monkeypatch):
    """The start-up check (lib/Runtime/MemoryCheck.cpp) through the C API: a device with less
    free memory than the program needs stops the load with how much is missing."""
    _, program = roomy
    needed = loaded_bytes(program)
    path = os.path.join(program.workdir, "mlp")
    monkeypatch.setenv("MEMOPT_DEVICE_FREE_BYTES", str(needed - 1000))
    with pytest.raises(memopt.LoadError) as error:
        memopt.load(path)
    message = str(error.value)
    assert "not enough device memory for program" in message
    assert "(1000 bytes) missing" in message
    monkeypatch.setenv("MEMOPT_DEVICE_FREE_BYTES", str(needed))
    assert memopt.load(path).arena_bytes == program.arena_bytes
