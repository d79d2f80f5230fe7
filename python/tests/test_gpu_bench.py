"""bench/gpu_bench.py: the parts that run without a GPU (configuration list, parsing of the
executable's bench lines), and the figures of the recorded device runs (bench/results/gpu/,
bench/results/gpu_precision/)."""

import importlib.util
import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_bench():
    spec = importlib.util.spec_from_file_location(
        "gpu_bench", os.path.join(REPO, "bench", "gpu_bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configs_cover_five_models_at_two_batches():
    bench = load_bench()
    names = [c[0] for c in bench.configs()]
    assert names == ["resnet50_b1", "resnet50_b32", "mobilenet_v3_large_b1",
                     "mobilenet_v3_large_b32", "vit_b_16_b1", "vit_b_16_b32", "bert_base_b1",
                     "bert_base_b8", "gpt2_b1", "gpt2_b8"]
    assert bench.input_spec("gpt2", 8) == ("input_ids", (8, 512), "int64")
    assert bench.input_spec("vit_b_16", 32) == ("input", (32, 3, 224, 224), "float32")
    name, ids = bench.make_input("bert_base", 1)
    assert name == "input_ids" and ids.shape == (1, 512) and ids.max() < 30522
    # The same input on every machine: a fixed seed.
    assert (bench.make_input("bert_base", 1)[1] == ids).all()


def test_parse_bench_lines():
    bench = load_bench()
    text = ("bench: backend=cuda runs=50 median_ms=2.9610 min_ms=2.9500 max_ms=3.1000\n"
            "memory: arena_bytes=1000 weight_bytes=64 io_bytes=24 workspace_bytes=4096 "
            "device_peak_used_bytes=123456 device_total_bytes=999999\n")
    result = bench.parse_bench(text)
    assert result["backend"] == "cuda" and result["runs"] == 50
    assert result["median_ms"] == 2.961
    assert result["device_peak_used_bytes"] == 123456
    # Beyond weights: arena + I/O buffers + the cuBLASLt workspace, not the weights.
    assert result["beyond_weights_bytes"] == 1000 + 24 + 4096
    assert bench.parse_bench("no bench output") == {}


def latest_result(suite):
    """The newest committed run of a bench/suites.toml suite (bench/run.py's result JSON), each
    table as a list of {column: value}."""
    folder = os.path.join(REPO, "bench", "results", suite)
    runs = [json.load(open(os.path.join(folder, name))) for name in sorted(os.listdir(folder))]
    result = max(runs, key=lambda run: run["date"])
    return {name: [dict(zip(table["columns"], row)) for row in table["rows"]]
            for name, table in result["tables"].items()}


def test_recorded_inference_run():
    """The run behind docs/gpu-benchmark.md, as bench/run.py recorded it (the raw device JSON
    lived in bench/results/gpu_raw/ until commit d9a817f): memory and latency goals met on all
    five models, CUDA outputs matching the host backend's, and the chunked attention agreeing
    with the fused kernel on every attention model at the real batch."""
    rows = {row["config"]: row for row in latest_result("gpu")["configurations"]}
    assert len(rows) == 10
    for name in ("resnet50_b32", "mobilenet_v3_large_b32", "vit_b_16_b32", "bert_base_b8",
                 "gpt2_b8"):
        row = rows[name]
        memopt = row["memopt beyond weights"]
        torch = min(row["eager beyond weights"], row["compile beyond weights"])
        assert memopt < torch, name
        assert row["meets goal"] is True, name
    for name, row in rows.items():
        assert row["host check rel. L2"] < 1e-5, name
    for name in ("vit_b_16_b32", "bert_base_b8", "gpt2_b8"):
        assert rows[name]["attention check rel. L2"] < 1e-5, name
    assert rows["resnet50_b32"]["attention check rel. L2"] is None


def test_recorded_precision_run():
    """The issue-12 run behind docs/gpu-benchmark.md's first section, as recorded (raw JSON in
    bench/results/precision_gpu_raw/ until commit d9a817f): TF32 beats PyTorch's default fp32
    eager on ResNet-50, fp16 keeps less memory than PyTorch's fp16 on the conv nets."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "gpu_bench_precision", os.path.join(REPO, "bench", "gpu_bench_precision.py"))
    precision = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(precision)
    summary = {row["model"]: row for row in latest_result("gpu_precision")["summary"]}
    assert summary["resnet50"]["tf32 / eager fp32"] < 1.0
    for model in ("resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny"):
        assert summary[model]["fp16 memory below PyTorch"], model
    assert precision.final_layout("resnet50", "fp16") == "nhwc"
    assert precision.final_layout("convnext_tiny", "tf32") == "nchw"
