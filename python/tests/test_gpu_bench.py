"""bench/gpu_bench.py: the parts that run without a GPU (configuration list, parsing of the
executable's bench lines, the report over the stored results of a device run)."""

import importlib.util
import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RAW = os.path.join(REPO, "bench", "results", "gpu_raw")


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


def test_report_over_stored_device_run(tmp_path):
    """The first run (bench/results/gpu_raw/first_run/) had `extra` calls: profiles and late
    host checks are merged into the report."""
    bench = load_bench()
    first = os.path.join(RAW, "first_run")
    doc, out = tmp_path / "doc.md", tmp_path / "gpu.json"
    assert bench.main(["report", "--device-json", os.path.join(first, "device.json"),
                       "--torch-json", os.path.join(first, "torch.json"),
                       "--prepare-json", os.path.join(first, "prepare.json"),
                       "--extra-json", os.path.join(first, "extra_profiles.json"),
                       os.path.join(first, "extra_host.json"),
                       "--doc-out", str(doc), "--json-out", str(out)]) == 0
    text = doc.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| resnet50 ") or
            line.startswith("| gpt2 ") or line.startswith("| bert_base ") or
            line.startswith("| vit_b_16 ") or line.startswith("| mobilenet_v3_large ")]
    assert len(rows) == 10
    assert "@" not in text  # every placeholder filled
    data = json.loads(out.read_text())["configs"]
    assert data["resnet50_b32"]["meets_goal"] is True
    assert data["gpt2_b8"]["meets_goal"] is False
    assert "meets_goal" in data["mobilenet_v3_large_b32"]
    # Host checks from the later call are merged in (gpt2_b1 was only checked there).
    assert data["gpt2_b1"]["host_check"]["rel_l2"] < 1e-5
    # Profiles of the misses end up in the document.
    assert "### bert_base_b8" in text and "binaryBroadcastKernel" in text


def test_report_over_latest_device_run(tmp_path):
    """The run behind docs/gpu-benchmark.md: memory and latency goals met on all five models,
    and the chunked attention agrees with the fused kernel on every attention model at the real
    batch (read from the stored JSON, not hard-coded in the report)."""
    bench = load_bench()
    doc, out = tmp_path / "doc.md", tmp_path / "gpu.json"
    assert bench.main(["report", "--device-json", os.path.join(RAW, "device.json"),
                       "--torch-json", os.path.join(RAW, "torch.json"),
                       "--prepare-json", os.path.join(RAW, "prepare.json"),
                       "--doc-out", str(doc), "--json-out", str(out)]) == 0
    data = json.loads(out.read_text())["configs"]
    for name in ("resnet50_b32", "mobilenet_v3_large_b32", "vit_b_16_b32", "bert_base_b8",
                 "gpt2_b8"):
        memopt = data[name]["memopt"]["beyond_weights_bytes"]
        torch = min(data[name]["eager"]["peak_beyond_weights_bytes"],
                    data[name]["compile"]["peak_beyond_weights_bytes"])
        assert memopt < torch, name
    for name in ("resnet50_b32", "mobilenet_v3_large_b32", "vit_b_16_b32", "bert_base_b8",
                 "gpt2_b8"):
        assert data[name]["meets_goal"] is True, name
    for name in ("vit_b_16_b32", "bert_base_b8", "gpt2_b8"):
        assert data[name]["attention_check"]["rel_l2"] < 1e-5, name
    assert data["resnet50_b32"]["attention_check"] is None
    assert "| chunked vs fused attention (rel. L2) |" in doc.read_text()


def test_precision_report_over_stored_runs(tmp_path):
    """bench/gpu_bench_precision.py's report over the stored device runs (the issue-12 section
    of docs/gpu-benchmark.md): every placeholder filled, the section written between its markers
    and replaced in place, the summary read from the JSON (TF32 beats PyTorch's default fp32
    eager on ResNet-50, fp16 keeps less memory than PyTorch's fp16 on the conv nets)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "gpu_bench_precision", os.path.join(REPO, "bench", "gpu_bench_precision.py"))
    precision = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(precision)
    doc, out = tmp_path / "doc.md", tmp_path / "precision.json"
    doc.write_text("# title\n\nintro\n\n## Results\n\nold text\n")
    template = os.path.join(REPO, "bench", "gpu_bench_precision_template.md")
    for _ in range(2):  # the second run replaces the section instead of adding one
        assert precision.main(["report", "--template", template, "--doc-out", str(doc),
                               "--json-out", str(out)]) == 0
    text = doc.read_text()
    assert text.count("<!-- precision-suite") == 1 and "@" not in text
    assert text.index("## Issue 12") < text.index("## Results") and "old text" in text
    assert "| resnet50 |" in text and "| llama_small |" in text
    summary = json.loads(out.read_text())["summary"]
    assert summary["resnet50"]["tf32_over_eager"] < 1.0
    for model in ("resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny"):
        assert summary[model]["fp16_memory_ok"], model
    assert precision.final_layout("resnet50", "fp16") == "nhwc"
    assert precision.final_layout("convnext_tiny", "tf32") == "nchw"
