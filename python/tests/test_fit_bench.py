"""bench/fit_bench: the PyTorch side's configuration search against a fake runner (no torch, no
GPU), the batch-free graph rewrite on a small ONNX graph (onnxruntime checks it computes the
same at the exported batch and runs at another), and the report on made-up device results."""

import os
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

from fit_bench.search import divisors_desc, search, trial_key  # noqa: E402

GIB = 2**30


class FakeGpu:
    """A model whose step needs state + m x per-sample bytes (a quarter of that with
    checkpointing, 0.6 with torch.compile's budget 0.5); time per sample falls with m and rises
    a third with checkpointing. Records every call."""

    def __init__(self, state=4 * GIB, per_sample=1 * GIB):
        self.state, self.per_sample, self.calls = state, per_sample, []

    def need(self, trial):
        share = 0.25 if trial["checkpoint"] else 1.0
        if trial.get("activation_memory_budget") is not None:
            share = 0.6
        return self.state + trial["micro_batch"] * self.per_sample * share

    def __call__(self, trial, budget):
        self.calls.append((trial_key(trial), budget))
        need = self.need(trial)
        if need > budget:
            return {"status": "oom", "peak_bytes": budget}
        per_sample = 1.0 / (1 + trial["micro_batch"] / 8)
        if trial["checkpoint"]:
            per_sample *= 4 / 3
        if trial["mode"] == "compile":
            per_sample *= 0.8
        return {"status": "ran", "samples_per_s": 1 / per_sample, "peak_bytes": need}


def test_divisors():
    assert divisors_desc(32) == [32, 16, 8, 4, 2, 1]
    assert divisors_desc(12) == [12, 6, 4, 3, 2, 1]


def test_search_finds_the_largest_micro_batch_and_compiles_only_there():
    gpu = FakeGpu()
    result = search(gpu, 32, [8 * GIB, 24 * GIB, 40 * GIB])
    # 8 GiB: eager runs at m=4 (4 + 4 GiB), checkpointing reaches 16 (4 + 4); compile at 4,
    # compile with budget 0.5 at 16 (4 + 9.6 GiB > 8: OOM).
    tried = result[8 * GIB]["tried"]
    assert [k for k in tried if k.endswith("eager")] == ["m32x1.eager", "m16x2.eager",
                                                         "m8x4.eager", "m4x8.eager"]
    assert tried["m4x8.eager"]["status"] == "ran"
    assert tried["m16x2.eager.ckpt"]["status"] == "ran"
    assert "m8x4.eager.ckpt" not in tried  # stopped at the first that ran
    assert tried["m4x8.compile"]["status"] == "ran"
    assert tried["m16x2.compile.amb0.5"]["status"] == "oom"
    assert result[8 * GIB]["best"] == "m16x2.eager.ckpt"
    # 40 GiB: the whole batch runs eagerly (4 + 32): no checkpointing tried, compile at 32.
    tried = result[40 * GIB]["tried"]
    assert "m32x1.eager" in tried and not any(".ckpt" in k for k in tried)
    assert result[40 * GIB]["best"] == "m32x1.compile"
    # A trial that ran under a smaller budget is not measured again.
    assert len(gpu.calls) == len(set(gpu.calls))
    # 24 GiB: eager reaches 16, checkpointing 32; compile's budget 0.5 runs at 32 (23.2 GiB),
    # and 40 GiB reuses that measurement.
    assert result[24 * GIB]["tried"]["m32x1.compile.amb0.5"]["status"] == "ran"
    assert result[40 * GIB]["tried"]["m32x1.compile.amb0.5"]["measured_under"] == 24 * GIB
    assert ("m32x1.compile.amb0.5", 40 * GIB) not in gpu.calls


def test_search_records_budgets_nothing_fits():
    gpu = FakeGpu(state=10 * GIB)
    result = search(gpu, 8, [8 * GIB, 16 * GIB])
    assert result[8 * GIB]["best"] is None
    assert all(r["status"] == "oom" for r in result[8 * GIB]["tried"].values())
    assert result[16 * GIB]["best"] is not None


def test_search_stops_at_the_deadline():
    gpu = FakeGpu()
    calls = {"n": 0}

    def out_of_time():
        calls["n"] += 1
        return calls["n"] > 3

    result = search(gpu, 32, [8 * GIB, 16 * GIB], out_of_time=out_of_time)
    assert len(gpu.calls) == 3
    statuses = [r["status"] for b in result.values() for r in b["tried"].values()]
    assert "deadline" in statuses


def test_batch_free_reshape_runs_at_another_batch(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from fit_bench.graphs import batch_free

    batch, seq, hidden = 4, 8, 6
    w = np.arange(hidden * hidden, dtype=np.float32).reshape(hidden, hidden) / 100
    mask = np.tile(np.arange(seq, dtype=np.int64).reshape(1, 1, seq), (batch, 1, 1))
    nodes = [
        helper.make_node("Reshape", ["x", "flat"], ["x2"]),  # [B*S, H]
        helper.make_node("MatMul", ["x2", "w"], ["y2"]),
        helper.make_node("Reshape", ["y2", "back"], ["y3"]),  # [B, S, -1]
        helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["maskf"], ["maskt"], perm=[0, 2, 1]),  # [B, S, 1]
        helper.make_node("Add", ["y3", "maskt"], ["y4"]),
        # Llama's form: a [1, S, H] constant expanded to [B, S, H] by a value_ints target.
        helper.make_node("Constant", [], ["bias_shape"], value_ints=[batch, seq, hidden]),
        helper.make_node("Expand", ["bias", "bias_shape"], ["bias_b"]),
        helper.make_node("Add", ["y4", "bias_b"], ["y"]),
        # A weight's reshape whose target starts with 4 too: not on the data path, kept.
        helper.make_node("Reshape", ["w", "wshape"], ["w49"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, hidden])],
        [numpy_helper.from_array(np.array([batch * seq, hidden], np.int64), "flat"),
         numpy_helper.from_array(np.array([batch, seq, -1], np.int64), "back"),
         numpy_helper.from_array(np.array([batch, 9], np.int64), "wshape"),
         numpy_helper.from_array(w, "w"), numpy_helper.from_array(mask, "mask"),
         numpy_helper.from_array(np.linspace(0, 1, seq * hidden, dtype=np.float32).reshape(
             1, seq, hidden), "bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    src, dst = str(tmp_path / "g.onnx"), str(tmp_path / "g.free.onnx")
    onnx.save_model(model, src)
    assert batch_free(src, dst, batch, seq) == 4  # two Reshapes, one Expand, one constant
    free = onnx.load(dst)
    assert [n.input[1] for n in free.graph.node if n.output[0] == "w49"] == ["wshape"]
    free.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "B"
    free.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "B"
    x = np.random.default_rng(0).standard_normal((batch, seq, hidden)).astype(np.float32)
    before = ort.InferenceSession(src).run(None, {"x": x})[0]
    session = ort.InferenceSession(free.SerializeToString())
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], before)
    two = session.run(None, {"x": x[:2]})[0]  # another batch: the same rows
    np.testing.assert_array_equal(two, before[:2])


def test_report_table_from_made_up_results():
    import fit_bench  # noqa: F401 - the package; the command line is loaded below
    import importlib.util

    spec = importlib.util.spec_from_file_location("fit_bench_cli",
                                                  os.path.join(REPO, "bench", "fit_bench.py"))
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    point = {"choices": {"precision": "bf16"}, "micro_batch": 16, "accumulate": 2,
             "recomputations": 3, "step_seconds": 0.150, "samples_per_second": 213.3,
             "device_bytes": 15 * GIB}
    prepare = {"programs": {"gpt2_medium.16GiB": {"fit": {"chosen_point": point},
                                                  "compile_s": 40},
                            "gpt2_medium.8GiB": {"error": "[fit] no configuration fits"}}}
    device = {"context_bytes": GIB // 2,
              "memopt": {"gpt2_medium.16GiB": {"median_ms": 160.0, "samples_per_s": 200.0,
                                               "device_peak_used_bytes": 16.4 * GIB,
                                               "weight_bytes": 6 * GIB, "arena_bytes": 9 * GIB,
                                               "io_bytes": 0, "workspace_bytes": 0}},
              "torch": {"gpt2_medium": {"trials": {"16": {"tried": {
                  "m8x4.eager": {"status": "ran", "samples_per_s": 150.0, "peak_bytes": 1},
                  "m16x2.eager": {"status": "oom"}}, "best": "m8x4.eager"},
                  "8": {"tried": {"m1x32.eager": {"status": "oom"}}, "best": None}}}}}
    report = cli.build_report(prepare, device)
    row = report["sweep"]["gpt2_medium.16GiB"]
    assert row["speed_ratio"] == pytest.approx(200 / 150)
    assert row["predicted_over_measured"] == pytest.approx(150 / 160)
    assert row["memopt_within_budget"] is True
    assert row["memopt_peak_less_context_bytes"] == pytest.approx(15.9 * GIB)
    device["memopt"]["gpt2_medium.16GiB"]["device_peak_used_bytes"] = 16.6 * GIB
    assert cli.build_report(prepare, device)["sweep"]["gpt2_medium.16GiB"][
        "memopt_within_budget"] is False
    assert row["memopt_config"] == "bf16 16 x 2, 3 recomputed"
    assert report["sweep"]["gpt2_medium.8GiB"]["torch_config"] == "no PyTorch config fits"
    assert "memopt_error" in report["sweep"]["gpt2_medium.8GiB"]
    assert report["sweep"]["gpt2_medium.8GiB"]["memopt_status"] == "no fit"
    assert row["memopt_status"] == "ran"
    assert report["trials"]["gpt2_medium.16GiB.m16x2.eager"]["status"] == "oom"


def test_report_reads_a_search_the_deadline_cut():
    import importlib.util

    from fit_bench.search import make_trial

    spec = importlib.util.spec_from_file_location("fit_bench_cli",
                                                  os.path.join(REPO, "bench", "fit_bench.py"))
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    live = {"16": [{"status": "oom", "trial": make_trial(32, 16)},
                   {"status": "ran", "samples_per_s": 90.0, "trial": make_trial(32, 8)},
                   {"status": "ran", "samples_per_s": 120.0,
                    "trial": make_trial(32, 16, checkpoint=True)}]}
    tried, best = cli.torch_trials({"live": live}, 16)
    assert best == "m16x2.eager.ckpt"
    assert set(tried) == {"m16x2.eager", "m8x4.eager", "m16x2.eager.ckpt"}
    report = cli.build_report({"programs": {}}, {"torch": {"gpt2_medium": {"live": live}}})
    assert report["sweep"]["gpt2_medium.16GiB"]["torch_samples_per_s"] == 120.0
    assert report["sweep"]["gpt2_medium.8GiB"].get("torch_config") is None  # not reached
