"""bench/run.py and bench/suites.toml: the suite table validates, every committed result JSON
fits its suite's schema, docs/benchmarks/ is exactly what the generator writes from those JSONs,
a run is recorded from a tool's raw output (Markdown, JSON and line tables), the device set-up
is the one place that sets NVLink multicast off and finds the wheels' libraries, and a host
suite runs end to end on a tiny input (when the build has memopt-plan)."""

import copy
import importlib.util
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytest.importorskip("tomllib", reason="bench/run.py reads bench/suites.toml with Python 3.11's "
                    "tomllib")


def load_driver():
    spec = importlib.util.spec_from_file_location("bench_run",
                                                  os.path.join(REPO, "bench", "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run = load_driver()


def test_suite_table_validates():
    table = run.load_suites()
    suites = table["suites"]
    # The tools that were in bench/ are suites (one-off device scripts are gone).
    for name in ("planner", "remat", "memory", "precision", "attention_arena",
                 "train_precision", "remat_sweep", "compile_scale", "gpu", "gpu_precision",
                 "train", "train_remat", "train_amp", "train_scale_check", "attention_sdpa",
                 "attention_backward", "conv_algo", "host_kernels", "fused_kernels"):
        assert name in suites, name
    for name, suite in suites.items():
        assert suite["steps"], name
        if suite["machine"] != "host":
            assert any(step["where"] == "device" for step in suite["steps"]), name
    assert table["device"]["env"]["NCCL_NVLS_ENABLE"] == "0"
    for folder in ("issue12_final", "issue16", "remat_gpu", "data_movement", "fused_head"):
        assert not os.path.exists(os.path.join(REPO, "bench", folder)), folder


@pytest.mark.parametrize("edit, message", [
    (lambda t: t["suites"]["planner"].update(tool="bench/none.py"), "does not exist"),
    (lambda t: t["suites"]["planner"].update(colour="red"), "unknown keys ['colour']"),
    (lambda t: t["suites"]["planner"]["steps"][0].update(where="gpu"), "where is one of"),
    (lambda t: t["suites"]["gpu"]["steps"][1].update(name="sources"), "two steps named"),
    (lambda t: t["suites"]["gpu"].update(machine="tpu"), "machine 'tpu'"),
    (lambda t: t["suites"]["gpu"]["tables"][0]["columns"][1].update(unit="KiB"), "unit is one"),
    (lambda t: t["suites"]["gpu"]["tables"][0].pop("rows"), "needs 'rows'"),
    (lambda t: t["device"].pop("env"), "[device] lacks 'env'"),
    (lambda t: t["suites"]["planner"]["steps"][0].update(command="x {outdir}"),
     "placeholder 'outdir' is not one of"),
    (lambda t: t["suites"]["host_kernels"]["tables"][0].update(pattern="(?P<x>"), "pattern:"),
    (lambda t: t["suites"]["host_kernels"]["tables"][0]["columns"][1].update(path="time"),
     "no group of the pattern"),
])
def test_bad_table_is_refused_by_name(edit, message):
    table = copy.deepcopy(run.load_suites())
    edit(table)
    with pytest.raises(run.SuiteError, match=None) as error:
        run.validate_table(table)
    assert message in str(error.value)


def test_committed_results_fit_their_schema():
    table = run.load_suites()
    count = 0
    for name in os.listdir(os.path.join(REPO, "bench", "results")):
        assert name in table["suites"], f"bench/results/{name} is no suite"
        for path, result in run.load_results(name):
            run.validate_result(name, table["suites"][name], result, path)
            assert os.path.getsize(path) < 16 * 1024, f"{path}: a result JSON stays small"
            count += 1
    assert count >= 16


def test_generated_pages_equal_committed_pages():
    """docs/benchmarks/ cannot drift from bench/results/: `bench/run.py report` rewrites it."""
    pages = run.generate_pages(run.load_suites())
    folder = os.path.join(REPO, "docs", "benchmarks")
    assert sorted(os.listdir(folder)) == sorted(pages)
    for name, text in pages.items():
        with open(os.path.join(folder, name)) as f:
            assert f.read() == text, f"docs/benchmarks/{name}: run python3 bench/run.py report"


def test_figures_the_readme_quotes_are_recorded():
    """A few of README.md's results, read back from the committed JSONs."""
    def rows(suite, table):
        result = run.load_results(suite)[0][1]["tables"][table]
        return [dict(zip(result["columns"], row)) for row in result["rows"]]

    remat = {(r["config"], r["variant"]): r for r in rows("train_remat", "memopt")}
    assert round(100 * remat[("resnet50_b64.sgd", ".remat50")]["overhead"], 1) == 5.8
    assert round(100 * remat[("gpt2_b8.sgd", ".remat25")]["overhead"], 1) == 11.0
    scale = run.load_results("train_scale_check")
    tinyllama = [r for _, r in scale if r.get("label") == "tinyllama"][0]
    step = dict(zip(tinyllama["tables"]["memopt"]["columns"],
                    tinyllama["tables"]["memopt"]["rows"][0]))
    assert round(step["step wall"], 1) == 87.2
    assert round(step["whole step"] / 2**30, 1) == 22.0
    gpu = {r["config"]: r for r in rows("gpu", "configurations")}
    assert round(gpu["resnet50_b32"]["memopt beyond weights"] / 2**20) == 240


def write_suite(tmp_path):
    table = {"device": {"kind": "nvidia-h200", "kinds": ["nvidia-h200"], "carry": ".dev-bench",
                        "arch": "sm_90", "env": {"NCCL_NVLS_ENABLE": "0"}},
             "suites": {"toy": {
                 "title": "Toy", "tool": "bench/run.py", "machine": "nvidia-h200",
                 "description": "A toy suite.",
                 "steps": [{"name": "run", "where": "device",
                            "command": "{python} tool.py --out {out}/toy"}],
                 "tables": [
                     {"name": "md", "source": "table.md", "format": "markdown", "index": 1,
                      "columns": ["model", "arena"]},
                     {"name": "js", "source": "*.json", "format": "json", "rows": "configs/*",
                      "columns": [{"name": "config", "path": "@1"},
                                  {"name": "memory", "path": "memopt/bytes", "unit": "MiB"},
                                  {"name": "ratio", "path": "ratio", "unit": "x"},
                                  {"name": "share", "path": "share", "unit": "%"},
                                  {"name": "file", "path": "@file"}]},
                     {"name": "txt", "source": "kernels.txt", "format": "lines",
                      "pattern": r"^(?P<case>.+?) +(?P<ms>[0-9.]+) ms(?: +(?P<rate>[0-9.]+) G)?$",
                      "columns": [{"name": "case", "path": "case"},
                                  {"name": "median", "path": "ms", "unit": "ms"},
                                  {"name": "rate", "path": "rate"}]}]}}}
    run.validate_table(table)
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "table.md").write_text("| a | b |\n| --- | --- |\n| 1 | 2 |\n\ntext\n\n"
                                  "| model | arena |\n| --- | ---: |\n| resnet | 1024 |\n"
                                  "| gpt2 | 2048 |\n")
    (raw / "device.json").write_text(json.dumps({"configs": {
        "a_b1": {"memopt": {"bytes": 3 * 2**20}, "ratio": 0.5, "share": 0.25},
        "a_b8": {"memopt": {}, "ratio": 1.234567891, "share": 1}}}))
    (raw / "kernels.txt").write_text("matmul [197,768]   31.00 ms 12.5 G\nsoftmax 0.52 ms\n"
                                     "error: none\n")
    return table, raw


def test_record_and_render_a_run(tmp_path):
    table, raw = write_suite(tmp_path)
    suite = table["suites"]["toy"]
    results = tmp_path / "results"
    path = run.record("toy", suite, str(raw), commit="abc1234", date="2026-11-28",
                      gpu="NVIDIA H200", command="python3 tool.py", label="call1",
                      results=str(results))
    assert path.endswith("toy/2026-11-28_abc1234_call1.json")
    result = json.load(open(path))
    assert result["tables"]["md"]["rows"] == [["resnet", "1024"], ["gpt2", "2048"]]
    js = result["tables"]["js"]
    assert js["rows"][0] == ["a_b1", 3 * 2**20, 0.5, 0.25, "device"]
    assert js["rows"][1] == ["a_b8", None, 1.23457, 1, "device"]  # 6 significant digits
    assert result["tables"]["txt"]["rows"] == [["matmul [197,768]", 31.0, 12.5],
                                                ["softmax", 0.52, None]]
    # Without --gpu the GPU's name comes from the tool's own output.
    (raw / "device.json").write_text(json.dumps({"nvidia_smi": "NVIDIA H200, 580, 143771 MiB",
                                                 "configs": {}}))
    again = run.record("toy", suite, str(raw), commit="abc1234", date="2026-11-27",
                       results=str(results))
    assert json.load(open(again))["gpu"] == "NVIDIA H200"
    os.remove(again)
    page = run.render_page("toy", suite, run.load_results("toy", str(results)))
    assert "## 2026-11-28, abc1234 (call1), NVIDIA H200" in page
    assert "| config | memory (MiB) | ratio | share | file |" in page
    assert "| a_b1 | 3.0 | 0.50x | 25.0% | device |" in page
    assert "| a_b8 | - | 1.23x | 100.0% | device |" in page
    # A table may be optional (a tool whose output changed keeps its older runs valid); a
    # missing required one is refused.
    del result["tables"]["txt"]
    with pytest.raises(run.SuiteError, match=r"lacks the tables \['txt'\]"):
        run.validate_result("toy", suite, result)
    suite["tables"][2]["optional"] = True
    run.validate_result("toy", suite, result)
    # A result whose columns differ from the schema is refused, naming the table.
    result["tables"]["md"]["columns"] = ["model", "size"]
    with pytest.raises(run.SuiteError, match="table 'md': columns"):
        run.validate_result("toy", suite, result)


def test_markdown_header_must_match_the_schema(tmp_path):
    table, raw = write_suite(tmp_path)
    (raw / "table.md").write_text("| x |\n| --- |\n\n| model | size |\n| --- | --- |\n| a | 1 |\n")
    with pytest.raises(run.SuiteError, match=r"header \['model', 'size'\]"):
        run.record("toy", table["suites"]["toy"], str(raw), commit="abc", date="2026-11-28",
                   results=str(tmp_path / "results"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(run.SuiteError, match="no table.md"):
        run.record("toy", table["suites"]["toy"], str(tmp_path / "empty"), commit="abc",
                   date="2026-11-28", results=str(tmp_path / "results"))


def test_device_setup_in_one_place():
    table = run.load_suites()
    env = run.device_environment(table, base={"LD_LIBRARY_PATH": "/x"})
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["PYTHONUNBUFFERED"] == "1"
    assert env["CUDA_ARCH"] == "90" and env["LD_LIBRARY_PATH"].endswith("/x")
    # The run tool's command line stays short: the driver expands the step on the device.
    for name, suite in table["suites"].items():
        for line in run.plan_text(name, suite, table).splitlines():
            if line.startswith("device:"):
                assert len(line) < 300 and "kind=nvidia-h200" in line, line
    step = run.find_step("attention_sdpa", table["suites"]["attention_sdpa"], None, "device")
    command, _ = run.step_command("attention_sdpa", table, step, out="/out")
    assert "--out /out/attention_sdpa.json" in command and step["build_runtime"]
    with pytest.raises(run.SuiteError, match="several device steps"):
        run.find_step("gpu", table["suites"]["gpu"], None, "device")
    with pytest.raises(run.SuiteError, match="runs on the host, not the device"):
        run.find_step("gpu", table["suites"]["gpu"], "compile", "device")


def test_driver_command_line(tmp_path):
    def driver(*args, env=None):
        return subprocess.run([sys.executable, os.path.join(REPO, "bench", "run.py"), *args],
                              capture_output=True, text=True, env=env)

    listed = driver("list")
    assert listed.returncode == 0 and "planner" in listed.stdout
    assert driver("check").returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    missing = driver("device", "--suite", "attention_sdpa", env=env)
    assert missing.returncode == 1 and "--out or $OUT" in missing.stderr
    unknown = driver("plan", "--suite", "nope")
    assert unknown.returncode == 1 and "no suite 'nope'" in unknown.stderr
    dry = driver("prepare", "--suite", "planner", "--raw", str(tmp_path), "--build", "B",
                 "--dry-run", "--", "--time-limit", "1")
    assert dry.returncode == 0
    assert dry.stdout.strip().endswith(f"--binary B/bin/memopt-plan --output {tmp_path}/planner.md"
                                       " --time-limit 1")


def test_host_suite_end_to_end(tmp_path):
    """The planner suite on one small instance: prepare (the tool) then record and render."""
    build = os.environ.get("MEMOPT_BUILD_DIR", os.path.join(REPO, "build"))
    if not os.access(os.path.join(build, "bin", "memopt-plan"), os.X_OK):
        pytest.skip("no memopt-plan in the build")
    data = tmp_path / "data"
    data.mkdir()
    (data / "T.96.csv").write_text("id,lower,upper,size\n0,0,2,32\n1,1,3,32\n2,2,4,32\n"
                                   "3,0,4,32\n")
    raw = tmp_path / "raw"
    prepared = subprocess.run(
        [sys.executable, os.path.join(REPO, "bench", "run.py"), "prepare", "--suite", "planner",
         "--raw", str(raw), "--build", build, "--", "--data", str(data), "--time-limit", "5",
         "--auto-time-limit", "5"], capture_output=True, text=True, cwd=REPO)
    assert prepared.returncode == 0, prepared.stderr + prepared.stdout
    table = run.load_suites()
    path = run.record("planner", table["suites"]["planner"], str(raw), commit="test",
                      date="2026-01-01", results=str(tmp_path / "results"))
    rows = json.load(open(path))["tables"]["instances"]["rows"]
    assert len(rows) == 1 and rows[0][0] == "T" and rows[0][2] == "96"


def test_device_libraries_from_the_wheels(tmp_path, monkeypatch):
    """bench/device_env.py finds the wheels' lib folders without importing them (a namespace
    package laid out as PyTorch's nvidia-* wheels are) and puts them first."""
    import importlib

    for name in ("cudnn", "nccl"):
        (tmp_path / "nvidia" / name / "lib").mkdir(parents=True)
    (tmp_path / "nvidia" / "cudnn" / "include").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    for module in [m for m in sys.modules if m == "nvidia" or m.startswith("nvidia.")]:
        monkeypatch.delitem(sys.modules, module)
    import device_env

    dirs = device_env.wheel_library_dirs()
    assert dirs[:2] == [str(tmp_path / "nvidia" / "cudnn" / "lib"),
                        str(tmp_path / "nvidia" / "nccl" / "lib")]
    env = device_env.with_library_path({"LD_LIBRARY_PATH": "/old"}, dirs[:1])
    assert env["LD_LIBRARY_PATH"] == f"{dirs[0]}:/old"
    assert device_env.with_library_path({}, ["/a"])["LD_LIBRARY_PATH"] == "/a"
    monkeypatch.setattr(device_env, "SYSTEM_CUDNN_INCLUDES", (str(tmp_path / "none"),))
    assert device_env.cudnn_paths() == (str(tmp_path / "nvidia" / "cudnn" / "include"),
                                         str(tmp_path / "nvidia" / "cudnn" / "lib"))
    table = run.load_suites()
    assert run.device_environment(table, base={})["LD_LIBRARY_PATH"].startswith(dirs[0])


def test_device_step_packs_and_unpack_restores(tmp_path):
    """A device step writes under a scratch {out} that the driver packs into
    OUT/SUITE-STEP.tar.gz (the run tool brings back 8 files at most); `unpack` puts it into
    RAW/STEP/, where `report` finds the tables' sources at any depth."""
    table, _ = write_suite(tmp_path)
    suite = table["suites"]["toy"]
    suite["tables"] = suite["tables"][1:2]  # the JSON table
    step = dict(suite["steps"][0], command=(
        "mkdir -p {out}/sub && echo \"$NCCL_NVLS_ENABLE\" > {out}/sub/env.txt && "
        "printf '{{\"configs\": {{\"x_b1\": {{\"ratio\": 2}}}}}}' > {out}/device.json"))
    out = tmp_path / "OUT"
    assert run.run_step("toy", table, step, str(out), "device") == 0
    assert os.listdir(out) == ["toy-run.tar.gz"]
    raw = tmp_path / "unpacked"
    [target] = run.unpack("toy", suite, [str(out)], str(raw))
    assert target == str(raw / "run")
    assert (raw / "run" / "sub" / "env.txt").read_text().strip() == "0"
    path = run.record("toy", suite, str(raw), commit="abc", date="2026-11-28", gpu="G",
                      results=str(tmp_path / "results"))
    assert json.load(open(path))["tables"]["js"]["rows"] == [["x_b1", None, 2, None, "device"]]
    (out / "toy-other.tar.gz").write_bytes(b"")
    with pytest.raises(run.SuiteError, match="not SUITE-STEP.tar.gz of a device step"):
        run.unpack("toy", suite, [str(out / "toy-other.tar.gz")], str(raw))
    failing = dict(step, command="exit 3")
    assert run.run_step("toy", table, failing, str(out), "device") == 3
    assert (out / "toy-run.tar.gz").exists()  # what a failed step left still comes back
