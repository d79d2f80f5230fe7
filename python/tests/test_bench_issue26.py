"""Issue 26's benchmarks, what can run without a GPU: the case table of
bench/gpu_bench_precision.py --issue 26 (issue 12's cases unchanged), and the report
(bench/gpu_bench_issue26.py) from small fake device outputs: merged calls, targets held per
row, and the rows bench/run.py's suite `issue26` records."""

import importlib.util
import json
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
pytest.importorskip("tomllib", reason="bench/run.py reads bench/suites.toml with tomllib")


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = load("gpu_bench_precision", "bench/gpu_bench_precision.py")
run = load("bench_run", "bench/run.py")


def test_issue12_cases_are_unchanged():
    cases = bench.profile_cases("issue12")
    assert cases == bench.MODELS
    assert [bench.config_name(c) for c in cases][-3:] == ["gpt2_b8", "bert_base_b8",
                                                           "llama_small_b8"]
    assert bench.input_spec("resnet50") == ("input", (32, 3, 224, 224), "float32")
    assert bench.input_spec("gpt2") == ("input_ids", (8, 512), "int64")
    assert ("fp16", "nchw") in bench.variants("resnet50")
    assert bench.output_name("bert_base") == "last_hidden_state"


def test_issue26_cases():
    cases = bench.profile_cases("issue26")
    names = [bench.config_name(c) for c in cases]
    assert len(cases) == 12 and len(set(names)) == 12
    for model in ("gpt2", "bert_base", "llama_small", "qwen2_small"):
        assert f"{model}_b8" in names and f"{model}_b8_s2048" in names
    assert bench.input_spec("qwen2_small_s2048") == ("input_ids", (8, 2048), "int64")
    assert bench.input_spec("efficientnet_v2_s") == ("input", (32, 3, 300, 300), "float32")
    assert bench.input_spec("vit_b_16") == ("input", (32, 3, 224, 224), "float32")
    assert bench.variants("gpt2_s2048", "issue26") == [("fp16", "auto"), ("bf16", "auto")]
    assert ("fp16", "nhwc") in bench.variants("convnext_tiny", "issue26")
    name, ids = bench.make_input("qwen2_small_s2048")
    assert name == "input_ids" and ids.shape == (8, 2048) and ids.max() < 32000
    assert bench.PROFILES["issue26"]["torch_modes"] == ["compile_fp16", "compile_bf16"]
    assert set(bench.PROFILES["issue26"]["torch_modes"]) <= set(bench.TORCH_MODES)


def target_ms(program):
    return bench.target_ms({"modes": {"compile_fp16": {"median_ms": 2.0},
                                      "compile_bf16": {"median_ms": 3.0}}}, program)


def test_each_precision_is_held_to_its_own_compile():
    assert target_ms("gpt2_b8_s2048_fp16_auto") == 2.0
    assert target_ms("gpt2_b8_s2048_bf16_auto") == 3.0
    assert target_ms("gpt2_b8_fp32_auto") is None


def fake_run(tmp_path):
    """Two inference calls (the second measures what the first left at its deadline) and
    the two training precisions, as the device calls write them."""
    first, second = tmp_path / "infer", tmp_path / "infer2"
    for folder in (first, second, tmp_path / "fp16", tmp_path / "bf16"):
        folder.mkdir()
    mib = 2**20
    (first / "memopt.json").write_text(json.dumps({"programs": {
        "gpt2_b8_s2048_fp16_auto": {"model": "gpt2_s2048", "memopt": {
            "median_ms": 30.0, "beyond_weights_bytes": 100 * mib},
            "ncu_profile": {"top": [{"name": "attentionKernel", "calls": 12, "ms": 9.0}]}},
        "gpt2_b8_s2048_bf16_auto": {"model": "gpt2_s2048", "cuda_error": "deadline"},
        "convnext_tiny_b32_fp16_auto": {"model": "convnext_tiny", "memopt": {
            "median_ms": 5.0, "beyond_weights_bytes": 50 * mib}},
        "convnext_tiny_b32_fp16_nhwc": {"model": "convnext_tiny", "memopt": {
            "median_ms": 9.0, "beyond_weights_bytes": 50 * mib}}}}))
    (first / "torch.json").write_text(json.dumps({"configs": {
        "gpt2_s2048": {"environment": {"torch": "2.11.0"}, "modes": {
            "compile_fp16": {"median_ms": 25.0, "peak_beyond_weights_bytes": 200 * mib},
            "compile_bf16": {"error": "deadline"}}},
        "convnext_tiny": {"modes": {
            "compile_fp16": {"median_ms": 5.5, "peak_beyond_weights_bytes": 40 * mib}}}}}))
    (first / "prepare.json").write_text(json.dumps({"convnext_tiny_b32_fp16_auto": {
        "layout_line": "[layout] auto: 0 of 22 convolutions channels-last, 46 transposes"}}))
    (second / "memopt.json").write_text(json.dumps({"programs": {
        "gpt2_b8_s2048_bf16_auto": {"model": "gpt2_s2048", "memopt": {
            "median_ms": 20.0, "beyond_weights_bytes": 100 * mib}}}}))
    (second / "torch.json").write_text(json.dumps({"configs": {"gpt2_s2048": {"modes": {
        "compile_bf16": {"median_ms": 24.0, "peak_beyond_weights_bytes": 150 * mib}}}}}))
    for precision, memopt_ms, total in (("fp16", 40.0, 2000), ("bf16", 60.0, 3000)):
        (tmp_path / precision / "device.json").write_text(json.dumps({
            "precision": precision,
            "memopt": {"gpt2_b8.sgd": {"median_ms": memopt_ms, "total_bytes": total * mib,
                                       "beyond_state_bytes": 900 * mib},
                       "llama_1b_b4.sgd": {"median_ms": 1.0}},
            "torch": {"gpt2_b8.tf32=default": {"environment": {"torch": "2.11.0"}, "runs": {
                "compile.sgd": {"median_ms": 50.0, "peak_allocated_bytes": 3000 * mib,
                                "beyond_state_bytes": 1500 * mib, "channels_last": False},
                "eager.sgd": {"median_ms": 70.0}}}}}))
    return first, second


def test_report_merges_calls_and_holds_targets(tmp_path):
    first, second = fake_run(tmp_path)
    out = tmp_path / "issue26.json"
    args = ["report", "--issue", "26", "--raw", str(first), str(second), "--train-json",
            str(tmp_path / "fp16" / "device.json"), str(tmp_path / "bf16" / "device.json"),
            "--json-out", str(out), "--md-out", str(tmp_path / "issue26.md")]
    assert bench.main(args) == 0
    result = json.loads(out.read_text())
    gpt2 = result["inference"]["gpt2_b8_s2048"]
    assert gpt2["fp16"]["over_compile"] == pytest.approx(1.2)
    assert gpt2["fp16"]["time_ok"] is False and gpt2["fp16"]["memory_ok"] is True
    assert gpt2["fp16"]["meets_target"] is False
    assert gpt2["fp16"]["top_kernels"][0]["name"] == "attentionKernel"
    # The second call's measurements replace the first call's deadline entries.
    assert gpt2["bf16"]["memopt_ms"] == 20.0 and gpt2["bf16"]["compile_ms"] == 24.0
    assert gpt2["bf16"]["meets_target"] is True and "error" not in gpt2["bf16"]
    convnext = result["inference"]["convnext_tiny_b32"]["fp16"]
    assert convnext["meets_target"] is False  # faster, but more memory beyond the weights
    assert convnext["memopt_nhwc_ms"] == 9.0
    assert convnext["layout"].startswith("auto: 0 of 22")
    assert result["inference"]["vit_b_16_b32"]["bf16"]["meets_target"] is None
    training = result["training"]
    assert sorted(training) == ["gpt2_b8.sgd.bf16", "gpt2_b8.sgd.fp16"]  # not llama_1b_b4
    assert training["gpt2_b8.sgd.fp16"]["meets_target"] is True  # 0.8x time, 0.67x memory
    bf16 = training["gpt2_b8.sgd.bf16"]
    assert bf16["over_compile"] == pytest.approx(1.2) and bf16["memory_ok"] is False
    text = (tmp_path / "issue26.md").read_text()
    assert "| gpt2_b8_s2048 | fp16 | 30.00 | 25.00 | 1.20 |" in text
    assert "Targets met on 1 of 24" in text
    # What bench/run.py's suite records from it.
    suite = run.load_suites()["suites"]["issue26"]
    tables = {spec["name"]: run.extract_table(spec, str(tmp_path)) for spec in suite["tables"]}
    rows = [dict(zip(tables["inference"]["columns"], r)) for r in tables["inference"]["rows"]]
    assert len(rows) == 24
    row = next(r for r in rows if r["config"] == "gpt2_b8_s2048" and r["precision"] == "bf16")
    assert row["memopt / compile"] == pytest.approx(20.0 / 24.0, rel=1e-3)
    assert row["meets target"] is True and row["memopt"] == 20.0
    assert len(tables["training"]["rows"]) == 2


def test_report_without_memopt_figures_fails(tmp_path):
    (tmp_path / "empty").mkdir()
    assert bench.main(["report", "--issue", "26", "--raw", str(tmp_path / "empty"),
                       "--json-out", str(tmp_path / "x.json")]) == 1


FAKE_TORCH_ONE = r'''
import json, os, sys, time
case, out, hold, compile_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
time.sleep(compile_s)  # "compiling"
if case == "broken":
    sys.exit(3)
result = {"model": case, "modes": {}}
json.dump(result, open(out, "w"))
open(hold + ".ready", "w").close()
while not os.path.exists(hold + ".go"):
    time.sleep(0.05)
result["modes"]["compile_fp16"] = {"median_ms": 1.0, "peak_beyond_weights_bytes": 0,
                                   "measured_at": time.time()}
json.dump(result, open(out, "w"))
'''


def test_held_torch_processes(tmp_path):
    """call2's PyTorch side without PyTorch: a stand-in for `torch-one --hold` speaks the same
    protocol. At most `limit` compile at once, one still compiling at the cap is stopped, a
    failing one is recorded, and the ready ones measure one after the other only when told."""
    script = tmp_path / "fake_torch_one.py"
    script.write_text(FAKE_TORCH_ONE)
    delays = {"a": 0.2, "b": 0.2, "broken": 0.1, "slow": 30.0}
    said = []
    held = bench.HeldTorch(list(delays), ["compile_fp16"], 5, str(tmp_path), said.append,
                           limit=2, cap=4.0,
                           command=lambda c, out, hold: [sys.executable, str(script), c, out,
                                                         hold, str(delays[c])])
    held.join_compiles()
    assert held.ready("a") and held.ready("b") and not held.ready("slow")
    assert not any(os.path.exists(held.path(c, ".go")) for c in delays)
    assert any("slow: still compiling at the cap" in line for line in said)
    out = tmp_path / "torch.json"
    results = held.measure(30, str(out), extra={"profile": "issue26"})
    assert results["a"]["modes"]["compile_fp16"]["median_ms"] == 1.0
    assert results["a"]["modes"]["compile_fp16"]["measured_at"] <= \
        results["b"]["modes"]["compile_fp16"]["measured_at"]
    assert results["broken"]["modes"] == {} and results["slow"]["error"] == "no result"
    assert json.loads(out.read_text())["profile"] == "issue26"


def test_train_prepare_takes_exported_graphs_without_weights(tmp_path):
    """The export call brings train_bench's graphs back without their .data files, as a
    .tar.gz: `prepare` unpacks it and fills the weights (fill_weights) before compiling."""
    pytest.importorskip("onnx")
    import tarfile

    from train_bench import prepare

    graph = os.path.join(REPO, "models", "today", "gpt2.onnx")
    archive = tmp_path / "train_graphs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(graph, arcname="gpt2_b8.onnx")
    folder = prepare.graphs_folder(str(archive), str(tmp_path / "work"))
    unpacked = os.path.join(folder, "gpt2_b8.onnx")
    assert os.path.exists(unpacked)
    filled = prepare.with_weights(unpacked, str(tmp_path / "work"))
    assert filled != unpacked and os.path.exists(filled)
    assert prepare.with_weights(filled, str(tmp_path / "work")) == filled  # complete already
    assert prepare.graphs_folder(str(tmp_path), "unused") == str(tmp_path)
