"""ZeRO-3 on the host backend (memopt-compile --train --data-parallel N --shard parameters,
docs/data-parallel.md "Parameters sharded"): each rank's weight region holds its shard of
every parameter, the parameters are gathered into the arena where the forward and the
backward use them, the gradients are reduce-scattered into the shards.

Oracles: one rank on the N-times batch (1e-5, as for the other shard modes in
test_data_parallel.py) and ZeRO-2 (`--shard gradients`) of the same program, bit for bit:
the gathered parameter holds the same values as ZeRO-2's all-gathered one, and the update of
a shard is the same elementwise arithmetic as ZeRO-2's sharded update of the same elements,
so every loss and every saved tensor must be identical, in f32, fp16 and bf16, with
accumulation and with rematerialization under a budget.

The ZeRO-3 programs compare with a gather cap small enough (GATHER_GROUPS) that every
parameter gather is a group of its own, issued one group ahead of its readers
(memopt-bucket-collectives' gather groups): the prefetch moves gathers earlier and the
groups bracket them, neither may change a value. In fp16 / bf16 the gathers of parameters
that every reader casts gather the low copy (the f32 shard cast into place): the same
values as a cast after the gather.
"""

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from test_data_parallel import (COMPILE, MICRO_BATCH, MODELS, OPTIMIZERS, PARAMETERS,
                                STATE_SUFFIXES, compare_state, data, file_name, make_mlp,
                                reference, relative_error, run, save_model, step_losses,
                                train)

assert reference  # the one-rank fixture, used by name below

# A 4-byte gather cap: every gather of these models' parameters is a group of its own,
# prefetched one group ahead.
GATHER_GROUPS = ["--gather-mib", str(4 / 2**20)]


def compile_step(onnx_path, out, ranks, shard, *args):
    run([COMPILE, onnx_path, "--train", "-o", out, "--quiet", "--data-parallel", ranks,
         "--shard", shard, *args])


def assert_same_state(model, optimizer, state, other):
    for name in PARAMETERS[model]:
        for suffix in [""] + STATE_SUFFIXES[optimizer]:
            actual = np.load(state / file_name(name + suffix))
            expected = np.load(other / file_name(name + suffix))
            assert actual.shape == expected.shape, name + suffix
            assert np.array_equal(actual, expected), name + suffix


def zero3_against_zero2(tmp_path, model, optimizer, x, y, *args, steps=3):
    """Compiles and trains the model with --shard parameters and --shard gradients; returns
    both runs' losses and stdout after checking they are bit-identical."""
    builder, _, ranks = MODELS[model]
    onnx_path = builder(tmp_path / "model.onnx", batch=MICRO_BATCH)
    results = {}
    for shard in ["parameters", "gradients"]:
        out = tmp_path / shard
        compile_step(onnx_path, out, ranks, shard, *OPTIMIZERS[optimizer], *args,
                     *(GATHER_GROUPS if shard == "parameters" else []),
                     "--report", tmp_path / f"{shard}.json")
        result = run([out, "--steps", steps, "--input", f"x={x}", "--input", f"labels={y}",
                      "--save-state", tmp_path / f"{shard}_state"])
        results[shard] = (step_losses(result.stdout), result.stdout)
    assert results["parameters"][0] == results["gradients"][0], results
    assert_same_state(model, optimizer, tmp_path / "parameters_state",
                      tmp_path / "gradients_state")
    dp = json.load(open(tmp_path / "parameters.json"))["data_parallel"]
    assert len(dp["gather_groups"]) == dp["parameter_gathers"] > 1
    return results


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
@pytest.mark.parametrize("model", ["mlp", "convnet"])
def test_n_ranks_equal_one_rank_on_the_n_times_batch(tmp_path, reference, model, optimizer):
    """N ranks of micro-batch 2 with sharded parameters against one rank of batch 2N (the
    MLP over 3 ranks has tails in fc1.weight and fc1.bias, the conv net's fc.bias over 2
    ranks): the same loss at every step, the same whole weights and optimizer state; and bit
    for bit ZeRO-2's run."""
    builder, sample_shape, ranks = MODELS[model]
    x, y = data(tmp_path, sample_shape, 4 * ranks)
    expected_losses, expected_state = reference(model, optimizer, MICRO_BATCH * ranks, x, y)
    results = zero3_against_zero2(tmp_path, model, optimizer, x, y)
    losses, stdout = results["parameters"]
    assert f"data parallel: {ranks} ranks (threads of this process), shard parameters " \
           "(ZeRO-3)" in stdout
    assert losses == pytest.approx(expected_losses, rel=1e-5), stdout
    compare_state(model, optimizer, tmp_path / "parameters_state", expected_state, {})


def test_accumulation(tmp_path, reference):
    """--accumulate 2 over 2 ranks: every micro-batch gathers the parameters and
    reduce-scatters its gradient into the sharded accumulator; equal to one rank on the
    batch of 8 and to ZeRO-2."""
    x, y = data(tmp_path, (8,), 16, seed=5)
    expected_losses, expected_state = reference("mlp", "sgd", 8, x, y)
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    out = tmp_path / "step"
    report = tmp_path / "report.json"
    compile_step(onnx_path, out, 2, "parameters", "--accumulate", 2, "--report", report,
                 *GATHER_GROUPS, *OPTIMIZERS["sgd"])
    losses, _ = train(out, x, y, tmp_path / "state")
    assert losses == pytest.approx(expected_losses, rel=1e-5)
    compare_state("mlp", "sgd", tmp_path / "state", expected_state, {})
    dp = json.load(open(report))["data_parallel"]
    parameters = 4 * (16 * 8 + 16 + 3 * 16 + 3)
    shards = 4 * (64 + 8 + 24 + (1 + 1))
    assert dp["per_rank"]["parameter_bytes"] == shards
    assert dp["per_rank"]["gradient_accumulator_bytes"] == shards
    # Over 2 ranks a ring sends half of each tensor: per micro-batch, a reduce-scatter of
    # every gradient and a forward gather of every parameter. fc2.weight is the only
    # parameter the backward reads (r's gradient; fc1's input x needs none, and a bias's
    # gradient does not read the bias), and its forward gather is still alive where the
    # backward one would be issued (fc2 is the last layer), so the backward reads it.
    half = parameters // 2
    assert dp["parameter_gathers"] == 4
    assert dp["sent_bytes_per_step"] == 2 * (half + half)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_mixed_precision_equals_zero2(tmp_path, precision):
    """fp16 (dynamic loss scaling) and bf16 steps over 3 ranks, the f32 masters sharded: the
    forward's low copy is cast from the gathered master, the backward's from the backward
    gather; bit for bit ZeRO-2's losses, scales and state after 6 steps, with the gradients
    reduced in f32 and in the low type."""
    x, y = data(tmp_path, (8,), 12, seed=7)
    for reduce_dtype in ["f32", "low"]:
        folder = tmp_path / reduce_dtype
        folder.mkdir()
        results = zero3_against_zero2(
            folder, "mlp", "sgd", x, y, "--precision", precision, "--reduce-dtype",
            reduce_dtype, *(["--loss-scale-init", "1024"] if precision == "fp16" else []),
            steps=6)
        scales = [line for line in results["parameters"][1].splitlines()
                  if line.startswith("step ")]
        assert scales == [line for line in results["gradients"][1].splitlines()
                          if line.startswith("step ")]
        # The MLP's Gemms read their weights and biases in the low type only: every gather
        # gathers the 2-byte copy, half the f32 bytes (forward: all four parameters;
        # backward: fc2.weight, unless it reads the forward gather).
        dp = json.load(open(folder / "parameters.json"))["data_parallel"]
        f32_gathered = 4 * (16 * 8 + 16 + 3 * 16 + 3) + \
            4 * 3 * 16 * (dp["parameter_gathers"] - 4)
        assert sum(dp["gather_groups"]) == f32_gathered // 2, dp


def make_deep_mlp(path, batch, features=16, hidden=48, layers=4, classes=3, seed=1):
    """Gemm-Tanh x 4 then a classifier, no biases: the activations saved for the backward
    and the gathered weights are what fills the arena."""
    rng = np.random.default_rng(seed)
    inits, nodes, previous, width = [], [], "x", features
    for i in range(layers):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((hidden, width)) * 0.3).astype(np.float32), f"l{i}.weight"))
        nodes.append(helper.make_node("Gemm", [previous, f"l{i}.weight"], [f"h{i}"], transB=1,
                                      name=f"l{i}"))
        nodes.append(helper.make_node("Tanh", [f"h{i}"], [f"a{i}"], name=f"tanh{i}"))
        previous, width = f"a{i}", hidden
    inits.append(numpy_helper.from_array(
        (rng.standard_normal((classes, hidden)) * 0.3).astype(np.float32), "head.weight"))
    nodes.append(helper.make_node("Gemm", [previous, "head.weight"], ["logits"], transB=1,
                                  name="head"))
    graph = helper.make_graph(
        nodes, "deep", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                      [batch, features])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])], inits)
    return save_model(graph, path)


def test_memory_budget_remat(tmp_path):
    """Under --memory-budget the remat solver sees the gathered parameters like any other
    arena buffer: for a 4-layer MLP over 2 ranks (32 samples each) with 90% of the free
    arena it gathers l0.weight again (with l0 and tanh0) instead of keeping them, the arena
    fits the budget, and the step trains bit for bit as the unbudgeted one, and as one rank
    on the batch of 64 (1e-5)."""
    ranks, names = 2, [f"l{i}.weight" for i in range(4)] + ["head.weight"]
    x, y = data(tmp_path, (16,), 4 * 64, seed=9)
    onnx_path = make_deep_mlp(tmp_path / "deep.onnx", batch=32)
    whole_path = make_deep_mlp(tmp_path / "whole.onnx", batch=64)
    run([COMPILE, whole_path, "--train", "-o", tmp_path / "whole", "--quiet",
         *OPTIMIZERS["adamw"]])
    # The budget: 90% of the arena with synchronous collectives (--bucket-mib 0). The
    # budgeted step keeps the default buckets: the remat search plans each candidate with
    # them (a bucket keeps its gradients alive to its wait), finds the budget unreachable so,
    # and meets it with synchronous collectives (the budget is a limit, overlap a preference).
    sync = ["--bucket-mib", 0, "--gather-mib", 0]
    compile_step(onnx_path, tmp_path / "free", ranks, "parameters", "--report",
                 tmp_path / "free.json", *sync, *OPTIMIZERS["adamw"])
    arena = json.load(open(tmp_path / "free.json"))["arena_bytes"]
    budget = int(arena * 0.9)
    compile_step(onnx_path, tmp_path / "budget", ranks, "parameters", "--memory-budget",
                 budget, "--report", tmp_path / "budget.json", *OPTIMIZERS["adamw"])
    report = json.load(open(tmp_path / "budget.json"))
    assert report["arena_bytes"] <= budget < arena
    assert report["data_parallel"]["buckets"] == []  # met without buckets
    assert report["data_parallel"]["gather_groups"] == []  # nor prefetched gathers
    # A budget the bucketed step meets keeps its buckets.
    compile_step(onnx_path, tmp_path / "bucketed", ranks, "parameters", "--report",
                 tmp_path / "bucketed.json", *OPTIMIZERS["adamw"])
    bucketed = json.load(open(tmp_path / "bucketed.json"))
    assert bucketed["data_parallel"]["buckets"]
    compile_step(onnx_path, tmp_path / "loose", ranks, "parameters", "--memory-budget",
                 bucketed["arena_bytes"], "--report", tmp_path / "loose.json",
                 *OPTIMIZERS["adamw"])
    loose = json.load(open(tmp_path / "loose.json"))
    assert loose["data_parallel"]["buckets"] == bucketed["data_parallel"]["buckets"]
    assert loose["data_parallel"]["gather_groups"] == \
        bucketed["data_parallel"]["gather_groups"] != []
    assert loose["arena_bytes"] <= bucketed["arena_bytes"]
    kinds = {entry["op"] for entry in report["remat"]["recomputed"]}
    assert "gather_parameter" in kinds, report["remat"]["recomputed"]
    losses = {}
    for name in ["whole", "free", "budget"]:
        losses[name], _ = train(tmp_path / name, x, y, tmp_path / f"{name}_state")
    assert losses["budget"] == losses["free"]
    assert losses["budget"] == pytest.approx(losses["whole"], rel=1e-5)
    for name in names:
        for suffix in ["", ".exp_avg", ".exp_avg_sq"]:
            budgeted = np.load(tmp_path / "budget_state" / file_name(name + suffix))
            free = np.load(tmp_path / "free_state" / file_name(name + suffix))
            whole = np.load(tmp_path / "whole_state" / file_name(name + suffix))
            assert np.array_equal(budgeted, free), name + suffix
            assert relative_error(budgeted, whole) <= 1e-5, name + suffix


def test_gather_groups_per_layer(tmp_path):
    """The 4-layer MLP over 2 ranks with a 3 KiB gather cap: one group per layer (l0's 3 KiB
    and l1-l3's 9 KiB weights each fill one; the head's 576 bytes join the next), prefetched
    one group ahead in the forward and, in reverse, in the backward. Bit for bit the step with
    every gather synchronous (--gather-mib 0) and within 1e-5 of one rank on the batch of 64;
    the prefetched gathers stay alive from their issue, so the plan is no smaller."""
    ranks, names = 2, [f"l{i}.weight" for i in range(4)] + ["head.weight"]
    x, y = data(tmp_path, (16,), 4 * 64, seed=11)
    onnx_path = make_deep_mlp(tmp_path / "deep.onnx", batch=32)
    whole_path = make_deep_mlp(tmp_path / "whole.onnx", batch=64)
    run([COMPILE, whole_path, "--train", "-o", tmp_path / "whole", "--quiet",
         *OPTIMIZERS["adamw"]])
    reports = {}
    for name, mib in [("layers", 3 / 1024), ("sync", 0)]:
        compile_step(onnx_path, tmp_path / name, ranks, "parameters", "--gather-mib", mib,
                     "--report", tmp_path / f"{name}.json", *OPTIMIZERS["adamw"])
        reports[name] = json.load(open(tmp_path / f"{name}.json"))
    layers = reports["layers"]["data_parallel"]
    weight = 4 * 48 * 16  # l0: 48 x 16; l1-l3: 48 x 48
    assert layers["gather_groups"][0] == weight
    assert len(layers["gather_groups"]) >= 5, layers["gather_groups"]
    # The head's backward reads its forward gather (alive where the backward one would be
    # issued): fewer bytes gathered than synchronously.
    assert layers["parameter_gathers"] < reports["sync"]["data_parallel"]["parameter_gathers"]
    assert sum(layers["gather_groups"]) <= \
        reports["sync"]["data_parallel"]["per_rank"]["gathered_parameter_bytes"]
    assert reports["sync"]["data_parallel"]["gather_groups"] == []
    assert reports["layers"]["arena_bytes"] >= reports["sync"]["arena_bytes"]
    losses = {}
    for name in ["whole", "layers", "sync"]:
        losses[name], _ = train(tmp_path / name, x, y, tmp_path / f"{name}_state")
    assert losses["layers"] == losses["sync"]
    assert losses["layers"] == pytest.approx(losses["whole"], rel=1e-5)
    for name in names:
        for suffix in ["", ".exp_avg", ".exp_avg_sq"]:
            prefetched = np.load(tmp_path / "layers_state" / file_name(name + suffix))
            sync = np.load(tmp_path / "sync_state" / file_name(name + suffix))
            whole = np.load(tmp_path / "whole_state" / file_name(name + suffix))
            assert np.array_equal(prefetched, sync), name + suffix
            assert relative_error(prefetched, whole) <= 1e-5, name + suffix


def test_bad_gather_mib(tmp_path):
    """A negative --gather-mib: one message, a non-zero exit."""
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    result = run([COMPILE, onnx_path, "--train", "-o", tmp_path / "out", "--data-parallel", 2,
                  "--shard", "parameters", "--gather-mib", -1], check=False)
    assert result.returncode != 0
    assert "--gather-mib must be at least 0 (0: no prefetch), got -1" in result.stderr
    assert not (tmp_path / "out").exists()


def test_report_per_rank_bytes(tmp_path):
    """The report's per-rank parameter bytes are the shards (chunk + tail of each parameter
    over 3 ranks), the unsharded figure the whole parameters, the gathered parameters are
    arena buffers; the executable prints the same per-rank figures, and its weight file holds
    one region per rank."""
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    report = tmp_path / "report.json"
    out = tmp_path / "step"
    compile_step(onnx_path, out, 3, "parameters", "--report", report, *OPTIMIZERS["adamw"])
    parameters = 4 * (16 * 8 + 16 + 3 * 16 + 3)
    shard = 4 * ((42 + 2) + (5 + 1) + (16 + 0) + (1 + 0))
    full = json.load(open(report))
    dp = full["data_parallel"]
    # A forward gather of each of the 4 parameters, one gather group under the default
    # 25 MiB cap; the backward's read of fc2.weight reads its forward gather, which the
    # group keeps alive anyway.
    assert dp["shard"] == "parameters" and dp["parameter_gathers"] == 4
    assert dp["gather_groups"] == [parameters]
    per_rank = dp["per_rank"]
    assert per_rank["parameter_bytes"] == shard
    assert dp["unsharded_parameter_bytes"] == parameters
    assert per_rank["optimizer_state_bytes"] == 2 * shard
    # Every gathered parameter is an arena buffer (buffers may share bytes over time).
    assert max(4 * 16 * 8, 4 * 3 * 16) <= per_rank["gathered_parameter_bytes"]
    assert per_rank["gathered_parameter_bytes_at_peak"] <= per_rank["arena_bytes"]
    x, y = data(tmp_path, (8,), 6)
    _, stdout = train(out, x, y, tmp_path / "state")
    # One weight region per rank in the file, then the 24-byte trailer.
    region = int(stdout.split(" weight_bytes=")[1].split()[0])
    assert out.with_name("step.weights").stat().st_size == 3 * region + 24
    assert f"per rank: arena_bytes={per_rank['arena_bytes']} weight_bytes=" in stdout
    assert (f"parameter_bytes={shard} "
            f"optimizer_state_bytes={2 * shard} ") in stdout


def test_save_writes_the_whole_model(tmp_path):
    """--save from a parameters-sharded run writes the whole trained model (the shards
    gathered): the same ONNX initializers as ZeRO-2's run, and the whole shapes;
    --save-weights writes each rank's region (its shards) and --weights reads them back."""
    x, y = data(tmp_path, (8,), 12)
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    saved = {}
    for shard in ["parameters", "gradients"]:
        out = tmp_path / shard
        compile_step(onnx_path, out, 3, shard, *OPTIMIZERS["sgd"])
        run([out, "--steps", 2, "--input", f"x={x}", "--input", f"labels={y}", "--save",
             tmp_path / f"{shard}.onnx"])
        saved[shard] = {init.name: numpy_helper.to_array(init)
                        for init in onnx.load(str(tmp_path / f"{shard}.onnx")).graph.initializer}
    assert set(saved["parameters"]) >= set(PARAMETERS["mlp"])
    for name in PARAMETERS["mlp"]:
        assert saved["parameters"][name].shape == saved["gradients"][name].shape, name
        assert np.array_equal(saved["parameters"][name], saved["gradients"][name]), name
    assert saved["parameters"]["fc1.weight"].shape == (16, 8)
    # --save-weights writes each rank's own region (its shards), one file per rank, and
    # --weights PATH resumes from them: the next step's loss is the uninterrupted run's.
    state = tmp_path / "w.bin"
    run([tmp_path / "parameters", "--steps", 1, "--input", f"x={x}", "--input",
         f"labels={y}", "--save-weights", state])
    for rank in range(3):
        assert (tmp_path / f"w.bin.rank{rank}-of-3").exists()
    resumed = step_losses(run([tmp_path / "parameters", "--steps", 1, "--input", f"x={x}",
                               "--input", f"labels={y}", "--weights", state]).stdout)
    assert len(resumed) == 1 and np.isfinite(resumed[0])
