"""Activation offload under a byte budget (memopt-compile --memory-budget --offload activations;
docs/offload.md, "Activations").

- The bundled model's training step (batch-statistics BatchNormalization, SGD with momentum)
  compiled under a budget with offload allowed: values go to the pinned host pool and back, the
  arena fits the budget, and on the host backend two steps give the plain program's losses and
  the same weight region, byte for byte (a copy moves bytes; nothing is computed differently).
- The report (JSON and text) gives the bytes offloaded, the host pool, the copy time and how
  much of it hid.
- Slow copies lose to recomputation; an impossible budget fails with the same clear message as
  without offload; --offload activations without a budget, or without --train, is refused;
  bad --offload values get one message; --offload activations,optimizer runs both offloads
  in one step.
"""

import json
import os
import re
import subprocess

import pytest

from conftest import _tool
import zoo

TRAIN = ["--train", "--bn-batch-stats", "--momentum", "0.9", "--remat-time-limit", "1"]


@pytest.fixture(scope="session")
def compiler():
    return _tool("memopt-compile")


def run(argv, timeout=1800):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout)


def compile_ok(argv):
    proc = run(argv)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))}\n{proc.stderr[-3000:]}"
    return proc


def inputs(tmp_path):
    import numpy as np
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 3, 32, 32)).astype(np.float32))
    np.save(tmp_path / "y.npy", np.array([3], dtype=np.int64))
    return ["--input", f"input={tmp_path / 'x.npy'}", "--input", f"labels={tmp_path / 'y.npy'}"]


@pytest.fixture(scope="module")
def plain(compiler, tmp_path_factory):
    folder = tmp_path_factory.mktemp("plain")
    base = str(folder / "base")
    compile_ok([compiler, zoo.BUNDLED_PATH, "-o", base, "--report", base + ".json", "--quiet",
                *TRAIN])
    return base, json.load(open(base + ".json"))["arena_bytes"]


def test_offloaded_training_step_equals_the_plain_one(compiler, plain, tmp_path):
    base, arena = plain
    budget = int(arena * 0.8)
    out = str(tmp_path / "offload")
    proc = compile_ok([compiler, zoo.BUNDLED_PATH, "-o", out, "--report", out + ".json",
                       "--memory-budget", str(budget), "--offload", "activations", *TRAIN])
    report = json.load(open(out + ".json"))
    assert report["arena_bytes"] <= budget
    # The same budget by recomputation alone costs at least as much estimated time as the
    # copies' stall plus what is still recomputed (here the copies hide: 2 recomputations
    # instead of 3).
    alone = str(tmp_path / "remat")
    compile_ok([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", alone + ".mlir", "--report",
                alone + ".json", "--quiet", "--memory-budget", str(budget), *TRAIN])
    recomputation = json.load(open(alone + ".json"))["remat"]["added_seconds"]
    with_copies = report["remat"]["added_seconds"] + report["offload"]["exposed_seconds"]
    assert with_copies <= recomputation * (1 + 1e-9), (with_copies, recomputation)
    offload = report["offload"]
    assert offload["values"] > 0 and offload["bytes"] > 0, offload
    assert 0 < offload["host_pool_bytes"] <= offload["bytes"]
    assert offload["copy_seconds"] > 0
    assert 0 <= offload["hidden_seconds"] <= offload["copy_seconds"] + 1e-12
    assert offload["hidden_seconds"] + offload["exposed_seconds"] == pytest.approx(
        offload["copy_seconds"])
    assert offload["bytes_per_second"] == pytest.approx(40e9)
    text = re.search(r"offload: (\d+) activations, .* to the host \(pinned pool .*\), copies "
                     r".* hidden under compute \(40 GB/s per direction\)", proc.stdout)
    assert text and int(text[1]) == offload["values"], proc.stdout

    args = inputs(tmp_path)
    losses, weights = {}, {}
    for name, program in (("base", base), ("offload", out)):
        weights[name] = tmp_path / f"{name}.trained"
        proc = run([program, *args, "--steps", "2", "--save-weights", weights[name]])
        assert proc.returncode == 0, proc.stderr
        losses[name] = re.findall(r"loss (\S+)", proc.stdout)
    assert len(losses["base"]) == 2 and losses["base"] == losses["offload"]
    # Parameters, momentum buffers and running statistics after two steps: the same bytes.
    assert open(weights["base"], "rb").read() == open(weights["offload"], "rb").read()


def test_slow_copies_lose_to_recomputation(compiler, plain, tmp_path):
    _, arena = plain
    out = str(tmp_path / "slow")
    compile_ok([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", out + ".mlir", "--report",
                out + ".json", "--quiet", "--memory-budget", str(int(arena * 0.6)),
                "--offload", "activations", "--offload-bandwidth", "0.0001", *TRAIN])
    report = json.load(open(out + ".json"))
    assert report.get("offload", {"values": 0})["values"] == 0, report.get("offload")
    assert report["remat"]["recomputed_ops"] > 0


def test_impossible_budget_still_fails_cleanly(compiler, tmp_path):
    out = tmp_path / "out" / "model"
    proc = run([compiler, zoo.BUNDLED_PATH, "-o", out, "--memory-budget", "1KiB",
                "--offload", "activations", *TRAIN])
    assert proc.returncode != 0
    assert proc.stderr.count("error:") == 1, proc.stderr
    assert "the arena does not fit in the memory budget of 1.00 KiB" in proc.stderr
    assert not os.path.exists(tmp_path / "out")


def test_offload_needs_a_budget(compiler, tmp_path):
    proc = run([compiler, zoo.BUNDLED_PATH, "-o", tmp_path / "m", "--offload", "activations",
                *TRAIN])
    assert proc.returncode != 0
    assert "offload activations needs a memory-budget" in proc.stderr, proc.stderr


def test_copies_never_cost_a_fit(compiler, tmp_path):
    """The smallest arena recomputation alone reaches is a budget that fits with offload allowed
    too: where the copies leave the solver no schedule (a reload keeps its value live from the
    reload on, where a late recomputation would not), it solves without them."""
    proc = run([compiler, zoo.BUNDLED_PATH, "-o", tmp_path / "none", "--memory-budget", "1KiB",
                *TRAIN])
    assert proc.returncode != 0
    smallest = int(re.search(r"the smallest arena reached(?: \(\d+ ops recomputed\))? is "
                             r"[^(]+\((\d+) bytes\)", proc.stderr)[1])
    out = str(tmp_path / "fits")
    compile_ok([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", out + ".mlir", "--report",
                out + ".json", "--quiet", "--memory-budget", str(smallest),
                "--offload", "activations", *TRAIN])
    assert json.load(open(out + ".json"))["arena_bytes"] <= smallest


def test_python_api(memopt_package, tmp_path):
    """Training(offload="activations") (and the list form): the same choice from Python; a
    training step with copies gives the plain step's losses."""
    import numpy as np
    memopt = memopt_package
    settings = dict(loss="cross-entropy", optimizer="sgd", lr=0.05, momentum=0.9)
    options = memopt.Training(**settings)
    offloading = memopt.Training(**settings, offload=["activations"])
    base = memopt.compile(zoo.BUNDLED_PATH, train=options, workdir=tmp_path / "plain")
    program = memopt.compile(zoo.BUNDLED_PATH, train=offloading,
                             memory_budget=int(base.arena_bytes * 0.8),
                             offload_bandwidth=40, workdir=tmp_path / "offload")
    assert program.report["offload"]["values"] > 0
    rng = np.random.default_rng(3)
    batch = {"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32),
             "labels": np.array([7], np.int64)}
    expected = [base.train_step(batch) for _ in range(2)]
    assert [program.train_step(batch) for _ in range(2)] == expected
    # The comma list, as the command line spells it: both offloads in one program.
    both = memopt.compile(zoo.BUNDLED_PATH, memory_budget=int(base.arena_bytes * 0.8),
                          train=memopt.Training(**settings, offload="activations,optimizer"),
                          workdir=tmp_path / "both")
    assert both.report["offload"]["values"] > 0 and both.report["host_state_bytes"] > 0
    assert [both.train_step(batch) for _ in range(2)] == expected
    with pytest.raises(memopt.Error, match="offload activations needs a memory-budget"):
        memopt.compile(zoo.BUNDLED_PATH, train=memopt.Training(**settings, offload="activations"))
    with pytest.raises(memopt.Error, match="offload 'activation' is not none, activations or "
                                           "optimizer"):
        memopt.compile(zoo.BUNDLED_PATH, train=memopt.Training(**settings, offload="activation"))


@pytest.mark.parametrize("value, message", [
    ("activations,cpu", "offload 'cpu' is not none, activations or optimizer"),
    ("none,optimizer", "offload none cannot be listed with activations or optimizer"),
])
def test_bad_offload_values(compiler, tmp_path, value, message):
    proc = run([compiler, zoo.BUNDLED_PATH, "-o", tmp_path / "m", "--memory-budget", "1MiB",
                "--offload", value, *TRAIN])
    assert proc.returncode != 0
    assert proc.stderr.count("error:") == 1 and message in proc.stderr, proc.stderr
    assert not os.path.exists(tmp_path / "m")


def test_offload_activations_needs_training(compiler, tmp_path):
    proc = run([compiler, zoo.BUNDLED_PATH, "-o", tmp_path / "m", "--memory-budget", "1MiB",
                "--offload", "activations"])
    assert proc.returncode != 0
    assert "offload activations needs train" in proc.stderr, proc.stderr


def test_both_offloads_in_one_step(compiler, plain, tmp_path):
    """--offload activations,optimizer: copies of saved values and the CPU update in one
    program; two host steps give the plain program's losses and weights bit for bit."""
    base, arena = plain
    out = str(tmp_path / "both")
    compile_ok([compiler, zoo.BUNDLED_PATH, "-o", out, "--report", out + ".json", "--quiet",
                "--memory-budget", str(int(arena * 0.8)), "--offload", "activations,optimizer",
                *TRAIN])
    report = json.load(open(out + ".json"))
    assert report["offload"]["values"] > 0, report.get("offload")
    assert report["host_state_bytes"] > 0
    losses = {}
    for name, program in (("base", base), ("both", out)):
        proc = run([program, *inputs(tmp_path), "--steps", "2"])
        assert proc.returncode == 0, proc.stderr
        losses[name] = re.findall(r"loss (\S+)", proc.stdout)
    assert len(losses["base"]) == 2 and losses["base"] == losses["both"]
