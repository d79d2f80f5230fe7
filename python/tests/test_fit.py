"""memopt.fit / memopt-compile --fit (docs/fit.md) and the start-up memory check, on the host.

- the chosen configuration fits the limit (planned and as loaded: arena + weight region + inputs)
  and is the fastest predicted of the configurations that fit; the search bisects, so it plans
  fewer configurations than there are micro-batches x precisions;
- trained on the host, it gives the same losses as the plain program compiled with that
  micro-batch and accumulation (memopt.compile of the model at that batch, Training(accumulate));
- a limit nothing meets: one message with the smallest footprint, nothing written;
- offload is a lever: a limit under the plain weight region (which no precision or
  recomputation shrinks) is met by the optimizer's offload, priced by the host update, and the
  chosen program trains like the plain one (losses within 1e-6);
- --fit auto reads MEMOPT_DEVICE_FREE_BYTES where there is no GPU;
- loading a program on a device with less free memory than it needs (MEMOPT_DEVICE_FREE_BYTES)
  fails at load, saying how much is missing.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import _tool

# One generator for this suite and the lit tests (test/Conversion/fit.test).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                                os.pardir, "test", "Conversion", "Inputs"))
from make_fit_mlp import CLASSES, FEATURES, make_mlp  # noqa: E402

GLOBAL_BATCH = 256


@pytest.fixture(scope="module")
def memopt(memopt_package):
    return memopt_package


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
    # For each offload choice (none, activations, optimizer, both: all that a host training
    # step supports; the optimizer's also with the accumulators on the device), the whole
    # batch, then a bisection over the 8 other divisors of 256: 1 + 4 plans (the whole batch
    # of the device-accumulators choice is not planned: it has no accumulators).
    assert fit["levers"] == ["precision", "offload"]
    offloads = ["none", "activations", "optimizer", "activations+optimizer",
                "optimizer+device-accumulators"]
    assert [point["choices"]["offload"] for point in fit["points"]] == \
        [value for value in offloads for _ in range(5)]
    assert chosen["choices"]["offload"] == "none"
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


def test_only_optimizer_offload_fits(memopt, roomy, tmp_path):
    """A limit below every plain configuration's weight region and inputs (AdamW's moments in
    it; precision and recomputation shrink neither): no configuration without the optimizer's
    offload fits, the fit chooses one with it, its device weight region is without the f32
    masters and the state, its predicted time carries the host update, and it trains like the
    plain program of the same micro-batch, accumulation and precision."""
    model, _ = roomy
    plain_fit = memopt.fit(model, 1 << 30, global_batch=GLOBAL_BATCH, train=training(memopt),
                           precisions=["fp32", "bf16"], offload=["none"],
                           workdir=tmp_path / "plain-fit").report["fit"]
    floor = min(point["weight_bytes"] + point["io_bytes"] for point in plain_fit["points"]
                if point["planned"])
    limit = floor - 1
    with pytest.raises(memopt.CompileError, match="no configuration fits"):
        memopt.fit(model, limit, global_batch=GLOBAL_BATCH, train=training(memopt),
                   precisions=["fp32", "bf16"], offload=["none", "activations"],
                   workdir=tmp_path / "none")
    program = memopt.fit(model, limit, global_batch=GLOBAL_BATCH, train=training(memopt),
                         precisions=["fp32", "bf16"], workdir=tmp_path / "fit")
    fit = program.report["fit"]
    chosen = chosen_point(fit)
    assert "optimizer" in chosen["choices"]["offload"], chosen
    assert chosen["fits"] and loaded_bytes(program) <= limit
    assert not [point for point in fit["points"]
                if point["fits"] and "optimizer" not in point["choices"]["offload"]]
    # The device keeps the working parameters only (masters and moments on the host), in
    # bf16 where the precision is bf16 (every reader casts them: docs/offload.md).
    parameters = sum(4 * (rows * cols + rows) for rows, cols in
                     ((256, FEATURES), (256, 256), (CLASSES, 256)))
    working = parameters // 2 if chosen["choices"]["precision"] == "bf16" else parameters
    assert working <= chosen["weight_bytes"] < 2 * working
    assert program.report["host_state_bytes"] >= 3 * parameters
    # Priced: the CPU update streams gradient, master and two moments (16 bytes a parameter).
    assert chosen["host_update_seconds"] > 0 and chosen["optimizer_copy_seconds"] > 0
    assert chosen["host_optimizer_seconds"] >= 0
    assert chosen["step_seconds"] == pytest.approx(
        chosen["accumulate"] * (chosen["micro_step_seconds"] - chosen["update_seconds"]) +
        chosen["update_seconds"])

    micro, accumulate = chosen["micro_batch"], chosen["accumulate"]
    plain = memopt.compile(make_mlp(tmp_path / "plain.onnx", batch=micro),
                           precision=chosen["choices"]["precision"],
                           train=training(memopt, accumulate), workdir=tmp_path / "plain")
    # Its weight region and inputs alone are over the limit.
    assert loaded_bytes(plain) - plain.arena_bytes > limit
    rng = np.random.default_rng(5)
    batches = [{"x": rng.standard_normal((micro, FEATURES)).astype(np.float32),
                "labels": rng.integers(0, CLASSES, micro).astype(np.int64)}
               for _ in range(accumulate)]
    fitted_losses, plain_losses = [], []
    for _ in range(3):
        for batch in batches:
            fitted_losses.append(program.train_step(batch))
            plain_losses.append(plain.train_step(batch))
    assert np.all(np.isfinite(fitted_losses))
    np.testing.assert_allclose(fitted_losses, plain_losses, rtol=0, atol=1e-6)
    assert sum(fitted_losses[-accumulate:]) < sum(fitted_losses[:accumulate])


def test_fit_offload_choices_printed_and_checked(memopt, roomy, tmp_path):
    model, _ = roomy
    with pytest.raises(memopt.InputError, match="offload 'cpu'"):
        memopt.fit(model, "1GiB", global_batch=8, offload=["cpu"], train=training(memopt))
    proc = subprocess.run([str(_tool("memopt-compile")), model, "--train", "--optimizer",
                           "adamw", "--fit", "1GiB", "--global-batch", "8", "--fit-offload",
                           "none,optimizer", "--emit", "plan", "-o", str(tmp_path / "p.mlir")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "offload none / optimizer" in proc.stdout
    assert re.search(r"fp32, offload none, micro-batch 8 x 1  <- chosen", proc.stdout), \
        proc.stdout


def test_fit_host_memory_bounds_the_offloaded_points(memopt, roomy, tmp_path):
    """memopt.fit(host_memory=...) (--fit-host-memory): an offloaded configuration whose
    pinned host memory exceeds it does not fit, and says why; a roomy bound keeps the choice
    and the report gives each point's host bytes."""
    model, _ = roomy
    with pytest.raises(memopt.InputError, match="host_memory"):
        memopt.fit(model, "1GiB", global_batch=8, host_memory=-1, train=training(memopt))
    with pytest.raises(memopt.CompileError, match="over --fit-host-memory"):
        memopt.fit(model, "1GiB", global_batch=8, offload=["optimizer"], host_memory=1024,
                   train=training(memopt), workdir=tmp_path / "tight")
    program = memopt.fit(model, "1GiB", global_batch=8, offload=["optimizer"],
                         host_memory="1GiB", train=training(memopt),
                         workdir=tmp_path / "roomy")
    fit = program.report["fit"]
    chosen = fit["points"][fit["chosen"]]
    assert chosen["choices"]["offload"] == "optimizer" and chosen["host_bytes"] > 0


def test_measured_kernel_times_at_two_micro_batches(memopt, roomy, tmp_path):
    """memopt.fit(kernel_times=[a, b]): each file says the micro-batch it was measured at
    (--profile-times writes "<micro-batch>"), the fit scales the times to every micro-batch it
    plans (docs/fit.md, "Predicted time"); the report's time source names both. Gemms far
    slower than their roofline make the predicted micro-step grow with the micro-batch."""
    model, _ = roomy
    files = []
    for batch, seconds in ((32, 1e-3), (128, 3e-3)):
        path = tmp_path / f"times{batch}.json"
        path.write_text(json.dumps({"fc0": seconds, "fc1": seconds, "fc2": seconds,
                                    "<micro-batch>": batch}))
        files.append(path)
    program = memopt.fit(model, "1GiB", global_batch=GLOBAL_BATCH, train=training(memopt),
                         offload=["none"], kernel_times=files, workdir=tmp_path / "fit")
    fit = program.report["fit"]
    assert "times32.json (micro-batch 32)" in fit["time_source"]
    assert "times128.json (micro-batch 128)" in fit["time_source"]
    steps = {p["micro_batch"]: p["micro_step_seconds"] for p in fit["points"]
             if p["planned"] and p["arena_budget_bytes"] == 0}
    assert steps[GLOBAL_BATCH] > 1.5 * steps[128] > 1.5 * 1.5 * min(steps.values())
