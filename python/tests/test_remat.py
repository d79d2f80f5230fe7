"""Rematerialization under a byte budget (memopt-compile --memory-budget; docs/remat.md).

- Every foundation model (both exporters), inference and the training step, at batch 1 on the
  host: the unconstrained program against the same model compiled under a budget that makes
  memopt recompute (0.8x the unconstrained arena for training, 0.95x for inference, or the
  smallest arena a failing budget reports): the planned arena is within the budget, something
  was recomputed, and every output (inference) or the loss, every parameter and every momentum
  buffer after one SGD step (training) are the unconstrained program's within
  RELATIVE_TOLERANCE. Budgets that do not fit must fail cleanly: one message naming the
  smallest arena reached and its buffers, a non-zero exit, nothing written. Where that
  smallest arena is the unconstrained one (the arena is at its floor: the peak op's own
  inputs, output and workspace fill it, as in every foundation model's inference at batch 1),
  the clean failure is what is checked.
- A generated U-Net (long skips): inference recomputes, matches onnxruntime and the
  unconstrained program.
- The report: recomputed ops by ONNX node name, added FLOPs and estimated time, bytes saved,
  arena against the budget (JSON, text, SVG); --remat-allow; bad options.
"""

import json
import os
import re
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

# Recomputation runs the same kernels on the same inputs: the host backend gives the same bits
# (measured: 0 difference on every model). The bound only allows for a kernel whose
# reduction order would depend on where its buffers sit in the arena.
RELATIVE_TOLERANCE = 1e-6
ORT_TOLERANCE = 1e-4
SMALLEST = re.compile(r"the smallest arena reached(?: \((\d+) ops recomputed\))? is [^(]+"
                      r"\((\d+) bytes\); at its peak, op \d+ \('[^']*'\), it holds '")


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


def execute(program, inputs, folder, train):
    argv = [program]
    for name, path in inputs.items():
        argv += ["--input", f"{name}={path}"]
    os.makedirs(folder, exist_ok=True)
    argv += ["--steps", "1", "--save-state", folder] if train else ["--output-dir", folder]
    proc = run(argv)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))}\n{proc.stderr[-3000:]}"
    values = {f: np.load(os.path.join(folder, f)) for f in sorted(os.listdir(folder))
              if f.endswith(".npy")}
    if train:
        values["loss"] = np.array([float(re.search(r"step 1 loss (\S+)", proc.stdout)[1])])
    return values


def worst_difference(reference, values):
    assert sorted(reference) == sorted(values)
    worst = 0.0
    for name, ref in reference.items():
        ref = ref.astype(np.float64)
        diff = np.linalg.norm(values[name].astype(np.float64) - ref)
        norm = np.linalg.norm(ref)
        worst = max(worst, diff / norm if norm > 0 else diff)
    return worst


#===------------------------------------------------------------------------------------===#
# The foundation set
#===------------------------------------------------------------------------------------===#

FOUNDATION = [m for m in zoo.MODELS if m.name in zoo.VISION + zoo.TEXT]

# The first budget tried, as a fraction of the unconstrained arena. Where it does not fit, the
# failure must be clean and name the smallest arena reached; that arena is then the budget
# (it must fit). Where the smallest arena is the unconstrained one (the arena is at its floor:
# every foundation model's inference at batch 1), the clean failure is what is checked.
FIRST_FRACTION = {False: 0.95, True: 0.8}


def make_inputs(model, folder, train):
    rng = np.random.default_rng(7)
    inputs = {}
    for name, (shape, dtype) in model.inputs.items():
        value = (rng.integers(0, 8192, shape).astype(np.int64) if dtype == "int64"
                 else rng.standard_normal(shape).astype(np.float32))
        inputs[name] = os.path.join(folder, f"{name}.npy")
        np.save(inputs[name], value)
    flags = []
    if train:
        if model.name == "bert_nn":
            inputs["target"] = os.path.join(folder, "target.npy")
            np.save(inputs["target"], rng.standard_normal((1, 256)).astype(np.float32))
            flags = ["--loss", "mse", "--loss-output", "pooled"]
        else:
            shape, high = ((1,), 1000) if model.family == "vision" else ((1, 128), 8192)
            inputs["labels"] = os.path.join(folder, "labels.npy")
            np.save(inputs["labels"], rng.integers(0, high, shape).astype(np.int64))
        flags += ["--train", "--momentum", "0.9"]
    return inputs, flags


def compile_with_budget(compiler, path, argv, budget, out):
    """Compiles under `budget`. Returns None when it fits; otherwise checks that the failure is
    clean (one error naming the smallest arena and its buffers, a non-zero exit, nothing
    written) and returns the smallest arena reached."""
    proc = run([compiler, path, "-o", out, "--report", out + ".json", *argv,
                "--memory-budget", str(budget)])
    if proc.returncode == 0:
        return None
    assert proc.stderr.count("error:") == 1, proc.stderr
    assert "the arena does not fit in the memory budget of" in proc.stderr, proc.stderr
    match = SMALLEST.search(proc.stderr)
    assert match, proc.stderr
    folder, stem = os.path.split(out)
    assert not [f for f in os.listdir(folder) if f.startswith(stem)], os.listdir(folder)
    return int(match[2])


@pytest.mark.parametrize("train", [False, True], ids=["inference", "train"])
@pytest.mark.parametrize("model", tiers.params(FOUNDATION, tiers.ZOO_TRAINING, id=lambda m: m.id))
def test_foundation_numerics_with_remat(compiler, tmp_path, model, train):
    path = fill_weights.fill(model.path, str(tmp_path / "model"), log=open(os.devnull, "w"))
    inputs, flags = make_inputs(model, str(tmp_path), train)
    if train and model.family == "vision" and any(
            n.op_type == "BatchNormalization"
            for n in onnx.load(path, load_external_data=False).graph.node):
        flags.append("--bn-batch-stats")
    argv = [*model.input_shape_args(), *flags, "--quiet", "--remat-time-limit", "1"]
    base = str(tmp_path / "base")
    compile_ok([compiler, path, "-o", base, "--report", base + ".json", *argv])
    unconstrained = json.load(open(base + ".json"))["arena_bytes"]
    budget = int(unconstrained * FIRST_FRACTION[train])
    out = str(tmp_path / "remat")
    smallest = compile_with_budget(compiler, path, argv, budget, out)
    if smallest is not None:
        if smallest >= unconstrained:
            return  # at its floor: the clean failure was the check
        budget = smallest
        assert compile_with_budget(compiler, path, argv, budget, out) is None, \
            "the smallest arena a failure reported does not fit as a budget"
    report = json.load(open(out + ".json"))
    assert report["arena_bytes"] <= budget
    assert report["budget_bytes"] == budget
    assert report["remat"]["recomputed_ops"] > 0
    # The planner's exact search stops at its time limit: on the larger training steps two
    # compiles of one model (one scheduled once more) can end 0.5% apart on a loaded machine.
    assert report["remat"]["unconstrained_arena_bytes"] == pytest.approx(unconstrained,
                                                                         rel=0.01)
    reference = execute(base, inputs, str(tmp_path / "base.out"), train)
    values = execute(out, inputs, str(tmp_path / "remat.out"), train)
    assert worst_difference(reference, values) <= RELATIVE_TOLERANCE


#===------------------------------------------------------------------------------------===#
# Inference with long skips: a U-Net
#===------------------------------------------------------------------------------------===#


def _weight(rng, name, shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)


def unet_model(path):
    """Three levels; the first level's activation (32 KiB) is read again at the very end."""
    rng = np.random.default_rng(3)
    conv = lambda x, w, y, name: helper.make_node(  # noqa: E731
        "Conv", [x, w], [y], name=name, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    up = lambda x, w, y, name: helper.make_node(  # noqa: E731
        "ConvTranspose", [x, w], [y], name=name, kernel_shape=[2, 2], strides=[2, 2])
    pool = lambda x, y, name: helper.make_node(  # noqa: E731
        "MaxPool", [x], [y], name=name, kernel_shape=[2, 2], strides=[2, 2])
    relu = lambda x, y, name: helper.make_node("Relu", [x], [y], name=name)  # noqa: E731
    nodes = [
        conv("x", "w1", "c1", "enc1/Conv"), relu("c1", "r1", "enc1/Relu"),
        pool("r1", "p1", "pool1"),
        conv("p1", "w2", "c2", "enc2/Conv"), relu("c2", "r2", "enc2/Relu"),
        pool("r2", "p2", "pool2"),
        conv("p2", "w3", "c3", "mid/Conv"), relu("c3", "r3", "mid/Relu"),
        up("r3", "t2", "u2", "up2/ConvTranspose"),
        helper.make_node("Add", ["u2", "r2"], ["a2"], name="skip2/Add"),
        conv("a2", "w4", "c4", "dec2/Conv"), relu("c4", "r4", "dec2/Relu"),
        up("r4", "t1", "u1", "up1/ConvTranspose"),
        helper.make_node("Add", ["u1", "r1"], ["a1"], name="skip1/Add"),
        conv("a1", "w5", "y", "head/Conv"),
    ]
    inits = [_weight(rng, "w1", [8, 8, 3, 3]), _weight(rng, "w2", [16, 8, 3, 3]),
             _weight(rng, "w3", [16, 16, 3, 3]), _weight(rng, "t2", [16, 16, 2, 2]),
             _weight(rng, "w4", [8, 16, 3, 3]), _weight(rng, "t1", [8, 8, 2, 2]),
             _weight(rng, "w5", [4, 8, 3, 3])]
    graph = helper.make_graph(
        nodes, "unet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 32, 32])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def test_unet_inference_recomputes_and_matches(compiler, tmp_path):
    path = unet_model(str(tmp_path / "unet.onnx"))
    x = np.random.default_rng(5).standard_normal((1, 8, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    inputs = {"x": str(tmp_path / "x.npy")}
    base = str(tmp_path / "base")
    compile_ok([compiler, path, "-o", base, "--report", base + ".json", "--quiet"])
    unconstrained = json.load(open(base + ".json"))["arena_bytes"]
    # 104 KiB -> 96 KiB: enc1 recomputed next to the last skip (its conv then needs its
    # workspace beside the decoder's 32 KiB output).
    budget = int(unconstrained * 0.95)
    out = str(tmp_path / "remat")
    compile_ok([compiler, path, "-o", out, "--report", out + ".json", "--quiet",
                "--memory-budget", str(budget)])
    report = json.load(open(out + ".json"))
    assert report["arena_bytes"] <= budget < unconstrained
    names = {op["name"] for op in report["remat"]["recomputed"]}
    assert names & {"enc1/Conv", "enc1/Relu"}, names
    reference = execute(base, inputs, str(tmp_path / "base.out"), False)
    values = execute(out, inputs, str(tmp_path / "remat.out"), False)
    assert worst_difference(reference, values) <= RELATIVE_TOLERANCE
    (expected,) = ort.InferenceSession(path).run(None, {"x": x})
    got = values["y.npy"]
    assert np.max(np.abs(got - expected)) <= ORT_TOLERANCE * np.max(np.abs(expected))


#===------------------------------------------------------------------------------------===#
# Report, options, errors (the bundled model's training step)
#===------------------------------------------------------------------------------------===#

TRAIN = ["--train", "--bn-batch-stats", "--momentum", "0.9", "--remat-time-limit", "1"]


def test_report_gives_what_was_recomputed_and_what_it_cost(compiler, tmp_path):
    plan = str(tmp_path / "base.mlir")
    compile_ok([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", plan, "--report",
                plan + ".json", "--quiet", *TRAIN])
    unconstrained = json.load(open(plan + ".json"))["arena_bytes"]
    # 0.6: the step's floor with batch_norm_training as one op is about 0.58 of the
    # unconstrained arena (the remaining peak is a conv's backward with its workspace).
    budget = int(unconstrained * 0.6)
    out = str(tmp_path / "half.mlir")
    proc = compile_ok([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", out, "--report",
                       out + ".json", "--memory-budget", str(budget), *TRAIN])
    report = json.load(open(out + ".json"))
    remat = report["remat"]
    assert report["budget_bytes"] == budget and report["arena_bytes"] <= budget
    assert remat["recomputed_ops"] == len(remat["recomputed"]) > 0
    assert remat["unconstrained_arena_bytes"] == unconstrained
    assert remat["saved_bytes"] == unconstrained - report["arena_bytes"]
    assert remat["added_flops"] == sum(op["flops"] for op in remat["recomputed"]) > 0
    assert remat["added_seconds"] == pytest.approx(
        sum(op["seconds"] for op in remat["recomputed"]))
    assert 0 < remat["added_time_fraction"] == pytest.approx(
        remat["added_seconds"] / remat["step_seconds"])
    assert "H100" in remat["roofline"]
    # Recomputed ops are named by their ONNX node, and the IR marks the clones.
    onnx_names = {n.name for n in onnx.load(zoo.BUNDLED_PATH).graph.node}
    assert all(op["name"] in onnx_names for op in remat["recomputed"]), remat["recomputed"]
    text = open(out).read()
    assert text.count("memopt.recomputed") == remat["recomputed_ops"]
    # The text report and the phase line.
    assert re.search(r"\[remat\] memory-budget \d+ bytes: \d+ ops recomputed", proc.stdout)
    assert f"rematerialization: {remat['recomputed_ops']} ops recomputed" in proc.stdout
    assert "recomputed: " + remat["recomputed"][0]["name"] in proc.stdout
    assert "budget " in proc.stdout
    # The picture: budget line, recomputation ticks (memopt-opt writes it from the IR).
    svg_path = str(tmp_path / "memory.svg")
    proc = run([_tool("memopt-opt"), out, "-o", os.devnull,
                f"--memopt-plan-memory=capacity={budget} outputs-in-arena=true svg={svg_path}"])
    assert proc.returncode == 0, proc.stderr
    svg = open(svg_path).read()
    assert svg.count("<title>recomputed ") == remat["recomputed_ops"]
    assert f"{remat['recomputed_ops']} ops recomputed" in svg and ">budget " in svg


def test_report_prices_with_the_solvers_costs(compiler, tmp_path):
    """With --remat-kernel-times the solver chose by measured times; the report prices the
    chosen recomputations with the same times (not the roofline) and says so: each recomputed
    op's seconds are its node's measured time, the added seconds their sum, and the text
    report names the measured times."""
    plan = str(tmp_path / "base.mlir")
    compile_ok([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", plan, "--report",
                plan + ".json", "--quiet", *TRAIN])
    budget = int(json.load(open(plan + ".json"))["arena_bytes"] * 0.6)
    # Every node measured at 7 us (its gradient ops share its name), roofline elsewhere.
    times = {node.name: 7e-6 for node in onnx.load(zoo.BUNDLED_PATH).graph.node}
    times_path = tmp_path / "times.json"
    json.dump(times, open(times_path, "w"))
    out = str(tmp_path / "measured.mlir")
    proc = compile_ok([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", out, "--report",
                       out + ".json", "--memory-budget", str(budget),
                       "--remat-kernel-times", times_path, *TRAIN])
    remat = json.load(open(out + ".json"))["remat"]
    assert remat["recomputed_ops"] > 0
    assert remat["cost_model"].startswith("measured kernel times (")
    measured = [op for op in remat["recomputed"] if op["name"] in times]
    assert measured, remat["recomputed"]
    assert all(op["seconds"] == times[op["name"]] for op in measured), measured
    assert remat["added_seconds"] == pytest.approx(
        sum(op["seconds"] for op in remat["recomputed"]))
    assert "step on measured kernel times (" in proc.stdout
    # The summary the pass leaves on the function carries the times it used.
    assert "memopt.remat_kernel_seconds = {" in open(out).read()
    # Without the times the roofline prices them, and the report says that.
    out = str(tmp_path / "roofline.mlir")
    compile_ok([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", out, "--report",
                out + ".json", "--quiet", "--memory-budget", str(budget), *TRAIN])
    remat = json.load(open(out + ".json"))["remat"]
    assert remat["cost_model"] == "roofline"
    assert all(op["seconds"] != 7e-6 for op in remat["recomputed"]), remat["recomputed"]


def test_remat_allow_limits_the_kinds(compiler, tmp_path):
    plan = str(tmp_path / "base.mlir")
    compile_ok([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", plan, "--report",
                plan + ".json", "--quiet", *TRAIN])
    unconstrained = json.load(open(plan + ".json"))["arena_bytes"]
    out = str(tmp_path / "allow.mlir")
    compile_ok([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", out, "--report",
                out + ".json", "--quiet", "--memory-budget", str(int(unconstrained * 0.8)),
                "--remat-allow", "conv", *TRAIN])
    kinds = {op["op"] for op in json.load(open(out + ".json"))["remat"]["recomputed"]}
    assert kinds and kinds <= {"conv"}, kinds
    proc = run([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", str(tmp_path / "bad"),
                "--memory-budget", "100KiB", "--remat-allow", "frobnicate"])
    assert proc.returncode != 0 and proc.stderr.count("error:") == 1
    assert "'frobnicate' in the rematerialization allow list is not a memopt op kind" \
        in proc.stderr
    assert not os.path.exists(tmp_path / "bad")
    proc = run([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", str(tmp_path / "bad"),
                "--memory-budget", "200KiB", "--remat-kernel-times", tmp_path / "none.json"])
    assert proc.returncode != 0 and proc.stderr.count("error:") == 1
    assert "cannot read kernel times" in proc.stderr, proc.stderr
    assert not os.path.exists(tmp_path / "bad")


def test_impossible_budget_fails_cleanly_and_writes_nothing(compiler, tmp_path):
    out = tmp_path / "out" / "model"
    proc = run([compiler, zoo.BUNDLED_PATH, "-o", out, "--report", tmp_path / "r.json",
                "--memory-budget", "1KiB", *TRAIN])
    assert proc.returncode != 0
    assert proc.stderr.count("error:") == 1, proc.stderr
    match = SMALLEST.search(proc.stderr)
    assert match, proc.stderr
    # The smallest arena named is what a budget of that size gets.
    assert re.search(r"'[^']+' \([a-z_]+(?: workspace)?\) [\d.]+ KiB", proc.stderr), proc.stderr
    assert not os.path.exists(tmp_path / "out") and not os.path.exists(tmp_path / "r.json")
    smallest = int(match[2])
    fits = str(tmp_path / "fits.mlir")
    compile_ok([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", fits, "--report",
                fits + ".json", "--quiet", "--memory-budget", str(smallest), *TRAIN])
    assert json.load(open(fits + ".json"))["arena_bytes"] <= smallest


def test_more_computations_per_op(compiler, tmp_path):
    """--remat-max-computations 3 searches a space that holds every schedule of 2: where the
    default's smallest arena fails, three computations reach that arena or a smaller one
    (or fail naming one no larger). 0 is refused with one message."""
    argv = [compiler, zoo.BUNDLED_PATH, "--emit", "plan", "--quiet", *TRAIN]
    smallest = {}
    for c in (2, 3):
        proc = run([*argv, "-o", str(tmp_path / f"c{c}"), "--memory-budget", "1KiB",
                    "--remat-max-computations", str(c)])
        assert proc.returncode != 0, proc.stdout
        match = SMALLEST.search(proc.stderr)
        assert match, proc.stderr
        smallest[c] = int(match[2])
    assert smallest[3] <= smallest[2], smallest
    fits = str(tmp_path / "fits.mlir")
    compile_ok([*argv, "-o", fits, "--report", fits + ".json", "--memory-budget",
                str(smallest[2]), "--remat-max-computations", "3"])
    assert json.load(open(fits + ".json"))["arena_bytes"] <= smallest[2]
    proc = run([*argv, "-o", str(tmp_path / "bad"), "--memory-budget", "100KiB",
                "--remat-max-computations", "0"])
    assert proc.returncode != 0 and proc.stderr.count("error:") == 1, proc.stderr
    assert "remat-max-computations must be at least 1" in proc.stderr, proc.stderr
    assert not os.path.exists(tmp_path / "bad")


def test_training_step_with_remat_matches(compiler, tmp_path):
    """The bundled model's training step with batch-statistics BatchNormalization (its
    statistics are updated once, by batch_norm_running_update, never by a clone) over two
    steps."""
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 3, 32, 32)).astype(np.float32))
    np.save(tmp_path / "y.npy", np.array([3], dtype=np.int64))
    inputs = ["--input", f"input={tmp_path / 'x.npy'}", "--input", f"labels={tmp_path / 'y.npy'}"]
    base = str(tmp_path / "base")
    compile_ok([compiler, zoo.BUNDLED_PATH, "-o", base, "--report", base + ".json", "--quiet",
                *TRAIN])
    budget = int(json.load(open(base + ".json"))["arena_bytes"] * 0.6)
    out = str(tmp_path / "remat")
    compile_ok([compiler, zoo.BUNDLED_PATH, "-o", out, "--quiet", "--memory-budget",
                str(budget), *TRAIN])
    losses, weights = {}, {}
    for name, program in (("base", base), ("remat", out)):
        weights[name] = tmp_path / f"{name}.trained"
        proc = run([program, *inputs, "--steps", "2", "--save-weights", weights[name]])
        assert proc.returncode == 0, proc.stderr
        losses[name] = re.findall(r"loss (\S+)", proc.stdout)
    assert len(losses["base"]) == 2 and losses["base"] == losses["remat"]
    # The whole weight region after two steps (parameters, momentum buffers and the running
    # statistics, which a second update per step would change): the same bytes.
    assert open(weights["base"], "rb").read() == open(weights["remat"], "rb").read()


def test_profile_times_feed_the_solver(compiler, tmp_path):
    """--profile-times writes each node's measured forward time in the format
    --remat-kernel-times reads; a budgeted compile takes it; a path that cannot be written
    fails with one message and leaves nothing behind."""
    rng = np.random.default_rng(1)
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 3, 32, 32)).astype(np.float32))
    np.save(tmp_path / "y.npy", np.array([5], dtype=np.int64))
    inputs = ["--input", f"input={tmp_path / 'x.npy'}", "--input", f"labels={tmp_path / 'y.npy'}"]
    base = str(tmp_path / "base")
    compile_ok([compiler, zoo.BUNDLED_PATH, "-o", base, "--report", base + ".json", "--quiet",
                *TRAIN])
    times_path = tmp_path / "times.json"
    proc = run([base, *inputs, "--steps", "3", "--profile-times", times_path])
    assert proc.returncode == 0, proc.stderr
    assert "profile-kind:" in proc.stdout
    times = json.load(open(times_path))
    # Entries in angle brackets are the run's own figures (docs/fit.md): the micro-batch the
    # times were measured at (the scaled prediction reads it), copy and launch costs.
    constants = {key: times.pop(key) for key in list(times) if key.startswith("<")}
    assert constants.get("<micro-batch>") == 1, constants  # the batch of 1 above
    # Ops carry their ONNX node's name; optimizer updates the parameter's, the loss "loss".
    graph = onnx.load(zoo.BUNDLED_PATH).graph
    nodes = {node.name for node in graph.node}
    names = nodes | {tensor.name for tensor in graph.initializer} | {"loss"}
    # Besides each name (its first op), the first op of each kind under it: "NAME @ KIND"
    # (a training step names a forward op's gradients after it).
    kinds = {key: key.split(" @ ") for key in times if " @ " in key}
    plain = set(times) - set(kinds)
    assert plain and plain <= names and plain & nodes, plain - names
    assert all(name in plain and kind.startswith("memopt.") for name, kind in kinds.values())
    assert any(kind == "memopt.conv_backward_filter" for _, kind in kinds.values()), kinds
    assert all(isinstance(v, float) and v >= 0 for v in times.values())
    assert not os.path.exists(str(times_path) + ".tmp")
    # 0.65: the smallest arena recomputation reaches here is about 0.61 of the unconstrained
    # one (the relu gradient reads the f32 relu output, not a one-byte mask).
    budget = int(json.load(open(base + ".json"))["arena_bytes"] * 0.65)
    out = str(tmp_path / "remat")
    compile_ok([compiler, zoo.BUNDLED_PATH, "--emit", "plan", "-o", out, "--report",
                out + ".json", "--quiet", "--memory-budget", str(budget),
                "--remat-kernel-times", times_path, *TRAIN])
    assert json.load(open(out + ".json"))["remat"]["recomputed_ops"] > 0
    missing = tmp_path / "no" / "times.json"
    proc = run([base, *inputs, "--steps", "1", "--profile-times", missing])
    assert proc.returncode != 0 and proc.stderr.count("error") == 1, proc.stderr
    assert "--profile-times: cannot write" in proc.stderr
    assert not os.path.exists(tmp_path / "no")
