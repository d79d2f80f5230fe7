"""--offload optimizer (docs/offload.md) on the host backend: f32 masters and optimizer state
in the host state region, the update on the CPU optimizer's threads.

- The offloaded program equals the plain one bit for bit (losses as printed, parameters and
  optimizer state after several steps): SGD with momentum and AdamW, fp32, fp16 with dynamic loss scaling
  (a clean run and one whose first steps overflow and are skipped) and bf16, with and
  without --accumulate. The CPU update is the host backend's arithmetic (double, one f32
  rounding per stored value), so anything but equality is a bug in the staging, the
  scalars or the order of the updates.
- The memory report: the optimizer state leaves the device weight region and is listed as
  host bytes, with the masters.
- --offload-accumulators device (the GPU sums the micro-batches, the CPU updates from the
  sum): bit for bit the plain program too, fp16 loss scaling with --accumulate included;
  the f32 accumulators stay in the device weight region and the staging holds the sums.
- The overlapped order: with accumulation, the CPU updates run on 1 or 4 threads while the
  backward goes on, with the accumulators on either side: the plain program's bits.
- Bad input: --offload without --train, an unknown value, fp16 loss scaling with
  --accumulate (host accumulators), --data-parallel, --offload-accumulators without the
  optimizer's offload or with a value not host or device.
"""

import json
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from test_training import COMPILE, compile_train, file_name, make_mlp, run, save  # noqa: E402

PARAMETERS = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")


def train(tmp_path, tag, model, x, y, steps, *args):
    out = compile_train(model, tmp_path / tag, *args)
    state = tmp_path / f"{tag}_state"
    result = run([out, "--input", f"x={x}", "--input", f"labels={y}", "--steps", str(steps),
                  "--save-state", state])
    losses = [line for line in result.stdout.splitlines() if line.startswith("step ")]
    # Parameters, and the optimizer state (the offloaded program's from the host region).
    return losses, {f: np.load(state / f) for f in os.listdir(state) if f.endswith(".npy")}


def data(tmp_path, rows=12):
    rng = np.random.default_rng(4)
    x = save(tmp_path / "x.npy", rng.standard_normal((rows, 8)).astype(np.float32))
    y = save(tmp_path / "y.npy", rng.integers(0, 3, rows).astype(np.int64))
    return x, y


CONFIGS = [
    ("sgd", "fp32", 1, ["--momentum", "0.9", "--lr", "0.1", "--weight-decay", "1e-3"]),
    ("adamw", "fp32", 1, ["--lr", "0.01"]),
    ("sgd", "fp32", 3, ["--momentum", "0.9", "--lr", "0.1"]),
    ("adamw", "fp32", 3, ["--lr", "0.01"]),
    ("sgd", "fp16", 1, ["--momentum", "0.9", "--lr", "0.1"]),
    ("adamw", "fp16", 1, ["--lr", "0.01"]),
    ("adamw", "bf16", 1, ["--lr", "0.01"]),
    ("sgd", "bf16", 3, ["--momentum", "0.9", "--lr", "0.1"]),
]


@pytest.mark.parametrize("optimizer,precision,accumulate,args", CONFIGS,
                         ids=[f"{o}-{p}-acc{a}" for o, p, a, _ in CONFIGS])
def test_offloaded_step_equals_the_plain_one(tmp_path, optimizer, precision, accumulate, args):
    model = make_mlp(tmp_path / "mlp.onnx", batch=4, features=8, hidden=16, classes=3)
    x, y = data(tmp_path)
    common = ["--optimizer", optimizer, "--precision", precision, "--accumulate",
              str(accumulate), *args]
    plain_losses, plain = train(tmp_path, "plain", model, x, y, 4, *common)
    losses, offloaded = train(tmp_path, "offload", model, x, y, 4, *common,
                              "--offload", "optimizer")
    assert losses == plain_losses
    # Every tensor of --save-state: parameters, momentum buffers or moments, accumulators.
    assert sorted(offloaded) == sorted(plain)
    assert any("momentum_buffer" in f or "exp_avg" in f for f in plain)
    for name in plain:
        assert np.array_equal(offloaded[name], plain[name]), name
    # Not trivially equal: training moved every weight and the loss.
    initial = {t.name: numpy_helper.to_array(t) for t in onnx.load(model).graph.initializer}
    for name in PARAMETERS:
        assert not np.array_equal(plain[file_name(name)], initial[name]), name
    assert len(set(line.split()[3] for line in plain_losses)) > 1, plain_losses


DEVICE_SUM_CONFIGS = [
    ("sgd", "fp32", ["--momentum", "0.9", "--lr", "0.1", "--weight-decay", "1e-3"]),
    ("adamw", "fp32", ["--lr", "0.01"]),
    ("adamw", "bf16", ["--lr", "0.01"]),
    # Host accumulators refuse this one (the overflow check reads the accumulators).
    ("adamw", "fp16", ["--lr", "0.01"]),
    ("sgd", "fp16", ["--momentum", "0.9", "--lr", "0.1", "--loss-scale-init", str(2.0 ** 20)]),
]


@pytest.mark.parametrize("optimizer,precision,args", DEVICE_SUM_CONFIGS,
                         ids=[f"{o}-{p}-{i}" for i, (o, p, _) in enumerate(DEVICE_SUM_CONFIGS)])
def test_device_accumulators_equal_the_plain_step(tmp_path, optimizer, precision, args):
    model = make_mlp(tmp_path / "mlp.onnx", batch=4, features=8, hidden=16, classes=3)
    x, y = data(tmp_path)
    common = ["--optimizer", optimizer, "--precision", precision, "--accumulate", "3", *args]
    steps = 12 if "--loss-scale-init" in args else 4
    plain_losses, plain = train(tmp_path, "plain", model, x, y, steps, *common)
    losses, offloaded = train(tmp_path, "offload", model, x, y, steps, *common,
                              "--offload", "optimizer", "--offload-accumulators", "device")
    assert losses == plain_losses
    if "--loss-scale-init" in args:
        assert any("update skipped" in line for line in plain_losses)
    assert sorted(offloaded) == sorted(plain)
    assert any(".grad" in f for f in plain)  # the accumulators are compared too
    for name in plain:
        # An overflowing micro-batch leaves inf / NaN in the accumulators of both.
        assert np.array_equal(offloaded[name], plain[name], equal_nan=True), name
    assert len(set(line.split()[3] for line in plain_losses)) > 1, plain_losses


@pytest.mark.parametrize("threads", ["1", "4"])
def test_overlapped_updates_with_accumulation(tmp_path, monkeypatch, threads):
    """The CPU updates run on their own threads while the backward goes on (and, with host
    accumulators, sum every micro-batch there): whichever finishes first, AdamW over six
    steps of two micro-batches gives the plain program's bits, with the accumulators on
    the host or on the device."""
    monkeypatch.setenv("MEMOPT_OFFLOAD_THREADS", threads)
    model = make_mlp(tmp_path / "mlp.onnx", batch=4, features=8, hidden=64, classes=3)
    x, y = data(tmp_path, rows=16)
    common = ["--optimizer", "adamw", "--lr", "0.01", "--accumulate", "2"]
    plain_losses, plain = train(tmp_path, "plain", model, x, y, 6, *common)
    for where in ("host", "device"):
        losses, offloaded = train(tmp_path, where, model, x, y, 6, *common, "--offload",
                                  "optimizer", "--offload-accumulators", where)
        assert losses == plain_losses, where
        for name in plain:
            assert np.array_equal(offloaded[name], plain[name]), (where, name)


def test_device_accumulators_report(tmp_path):
    """The accumulators stay in the device weight region; each staging slot holds the f32
    sum (here the gradients are f32 too) and the scalars."""
    model = make_mlp(tmp_path / "mlp.onnx", batch=4, features=8, hidden=16, classes=3)
    reports = {}
    for tag in ("host", "device"):
        report = tmp_path / f"{tag}.json"
        run([COMPILE, model, "--train", "--optimizer", "adamw", "--accumulate", "2",
             "--precision", "bf16", "--offload", "optimizer", "--offload-accumulators", tag,
             "--emit", "plan", "-o", tmp_path / f"{tag}.mlir", "--quiet", "--report", report])
        reports[tag] = json.loads(report.read_text())
    parameters = 4 * (16 * 8 + 16 + 3 * 16 + 3)
    host, device = reports["host"], reports["device"]
    assert device["weights_bytes"] - host["weights_bytes"] >= parameters
    assert host["host_state_bytes"] - device["host_state_bytes"] == parameters
    # bf16 gradients staged on the host side, f32 sums on the device side; each slot ends
    # with its bf16 working parameter's rounded copy after the sum padded to 64 bytes
    # (docs/offload.md, "Low working parameters").
    sizes = (16 * 8, 16, 3 * 16, 3)
    assert device["host_staging_bytes"] == sum(64 + -(-4 * n // 64) * 64 + 2 * n
                                               for n in sizes)
    assert host["host_staging_bytes"] < device["host_staging_bytes"]


def test_skipped_fp16_steps_are_skipped_on_the_host_too(tmp_path):
    """An initial scale of 2^40 overflows: the first steps are skipped on both (the CPU reads
    found_inf from the staged scalars) and the scale backs off the same way."""
    model = make_mlp(tmp_path / "mlp.onnx", batch=4, features=8, hidden=16, classes=3)
    x, y = data(tmp_path)
    common = ["--optimizer", "adamw", "--precision", "fp16", "--loss-scale-init", str(2.0 ** 40)]
    plain_losses, plain = train(tmp_path, "plain", model, x, y, 30, *common)
    losses, offloaded = train(tmp_path, "offload", model, x, y, 30, *common,
                              "--offload", "optimizer")
    assert any("update skipped" in line for line in plain_losses)
    assert losses == plain_losses
    for name in plain:
        assert np.array_equal(offloaded[name], plain[name]), name


def test_report_moves_the_state_to_the_host(tmp_path):
    model = make_mlp(tmp_path / "mlp.onnx", batch=4, features=8, hidden=16, classes=3)
    reports = {}
    for tag, extra in (("plain", []), ("offload", ["--offload", "optimizer"])):
        report = tmp_path / f"{tag}.json"
        run([COMPILE, model, "--train", "--optimizer", "adamw", "--emit", "plan", "-o",
             tmp_path / f"{tag}.mlir", "--quiet", "--report", report, *extra])
        reports[tag] = json.loads(report.read_text())
    parameters = 4 * (16 * 8 + 16 + 3 * 16 + 3)
    plain, offload = reports["plain"], reports["offload"]
    # AdamW's two moments leave the device; the parameters stay.
    assert plain["weights_bytes"] - offload["weights_bytes"] >= 2 * parameters
    assert plain.get("host_state_bytes", 0) == 0
    assert offload["host_state_bytes"] == 3 * parameters  # masters and two moments
    assert offload["host_staging_bytes"] == parameters + 4 * 64  # f32 gradients + scalars
    # The compute stream waits for a gradient's copy out at the next offloaded update, so the
    # plan keeps the gradient until then: at most one gradient (fc1.weight's 512 B) more.
    assert plain["arena_bytes"] <= offload["arena_bytes"] <= plain["arena_bytes"] + 4 * 16 * 8


@pytest.mark.parametrize("args,message", [
    (["--offload", "optimizer"], "offload optimizer needs train"),
    (["--train", "--offload", "host"],
     "offload 'host' is not none, activations or optimizer"),
    (["--train", "--offload", "optimizer,none"],
     "offload none cannot be listed with activations or optimizer"),
    (["--train", "--offload", "optimizer", "--precision", "fp16", "--accumulate", "2"],
     "dynamic loss scaling and --accumulate is not supported"),
    (["--train", "--offload", "optimizer", "--data-parallel", "2"],
     "offload optimizer with data-parallel is not supported"),
    (["--train", "--offload-accumulators", "device", "--accumulate", "2"],
     "offload-accumulators device needs offload optimizer"),
    (["--train", "--offload", "optimizer", "--offload-accumulators", "gpu"],
     "offload-accumulators 'gpu' is not host or device"),
])
def test_bad_offload_flags(tmp_path, args, message):
    model = make_mlp(tmp_path / "mlp.onnx")
    result = run([COMPILE, model, "--emit", "plan", "-o", tmp_path / "x.mlir", *args],
                 check=False)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_profile_times_measure_the_host_update(tmp_path):
    """--profile-times of an offloading program writes "<host update 1 GiB>": the CPU's
    seconds per GiB of state and gradient streamed, the entry --fit reads instead of its
    8 GB/s constant (include/memopt/Conversion/Fit.h). A plain program writes none."""
    model = make_mlp(tmp_path / "mlp.onnx", batch=4, features=8, hidden=256, classes=3)
    x, y = data(tmp_path)
    common = ["--optimizer", "adamw", "--lr", "0.01"]
    entries = {}
    for tag, extra in (("plain", []), ("offload", ["--offload", "optimizer"])):
        out = compile_train(model, tmp_path / tag, *common, *extra)
        times = tmp_path / f"{tag}.times.json"
        run([out, "--input", f"x={x}", "--input", f"labels={y}", "--steps", "3",
             "--profile-times", times])
        entries[tag] = json.loads(times.read_text())
    assert "<host update 1 GiB>" not in entries["plain"]
    seconds = entries["offload"]["<host update 1 GiB>"]
    # Any CPU streams 1 GiB in more than 1 ms and (unless badly overloaded) under a minute;
    # the op entries are seconds per run too.
    assert 1e-3 < seconds < 60, seconds
    assert "<copy 1 GiB>" not in entries["offload"]  # no device copies on the host backend
    # The micro-batch the times were measured at (--fit scales them to the others).
    assert entries["plain"]["<micro-batch>"] == entries["offload"]["<micro-batch>"] == 4
