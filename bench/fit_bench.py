#!/usr/bin/env python3
"""`--fit` benchmark (issue 27, "Benchmarks"): memopt-compile --fit BUDGET --global-batch G
against the best configuration a PyTorch user reaches under the same memory limit, on one GPU.

  budget sweep   GPT-2 medium (1024 tokens a sequence, global batch 32 sequences, bf16, AdamW)
                 and ResNet-50 (global batch 256 images, bf16, SGD with momentum 0.9,
                 channels-last on the PyTorch side) at 8, 16, 24 and 40 GiB
  larger than    a TinyLlama-1.1B-shaped Llama (python/models/llama_graph.py; global batch 16 x
  the GPU        1024 tokens, bf16, AdamW) under 8 GiB: `--fit` with `--offload optimizer`
                 (ZeRO-Offload's split) where plain `--fit` finds nothing, against PyTorch with
                 torchao's CPUOffloadOptimizer if `import torchao` works on the device (and plain
                 PyTorch, which cannot fit), else against the ZeRO-Offload paper's figure

memopt: the program `--fit` chose, its measured median step (`--bench`, whole optimizer steps:
accumulate micro-batches + update), the executable's own memory report (program bytes and the
device's peak used, cudaMemGetInfo-based, as train_bench records them) and the prediction
from the report's `fit.points[chosen].step_seconds` (the ratio predicted / measured: issue 27's
target is within 10%). PyTorch: torch.cuda.set_per_process_memory_fraction(budget / total),
AMP autocast bf16, fused AdamW / SGD, gradient accumulation to the global batch, per-block
torch.utils.checkpoint on / off, torch.compile with and without activation_memory_budget 0.5,
the largest micro-batch dividing the global batch that runs (bench/fit_bench/search.py: eager
first, large to small, OOM -> next; compile only at the sizes eager found). Every trial is
recorded (ran / OOM / error, samples/s, peak allocated) and the best per budget.

Design taken from: data_parallel_bench's flow (graphs exported on the device, compiled here,
built with nvcc there from carried sources and runtime libraries) and train_bench's runs and
memory lines; the PyTorch search is accelerate's `find_executable_batch_size` (halve after an
OOM). Where it goes further: the search also walks checkpointing and torch.compile (with and
without activation_memory_budget) at the sizes eager found, and one search serves all budgets
(a configuration measured under a smaller budget is not measured again), so the baseline is the
best a careful user reaches rather than the first batch that runs.

The steps (suite `fit` of bench/suites.toml; prepare here, device there, report here):

  export   (GPU)   train_bench's export of gpt2_medium_b4 and resnet50_b64 into graphs.tar.xz
                   (optional: data_parallel's export holds the same two graphs)
  prepare  (here)  the exported graphs (train_bench's export: graphs.tar.xz) made batch-free
                   (bench/fit_bench/graphs.py: --fit re-batches the inputs, the export baked its
                   batch into Reshape targets), weights filled, the Llama generated, then
                   memopt-compile --fit for every model x budget (--emit source); the sources
                   (xz), the runtime's headers and libraries into the carry folder
  device   (GPU)   builds every program with nvcc (data_parallel_bench's build), runs memopt's
                   programs, then PyTorch's search (one child process per model) until
                   --deadline-s; whatever is not reached is recorded as skipped
  report   (here)  fit.json (the run's figures) and the table

    python3 bench/fit_bench.py prepare --graphs /work/.device/1/graphs.tar.xz --dest .dev-bench/fit
    # device: python3 bench/fit_bench.py device --carry .dev-bench/fit --out $OUT --deadline-s 560
    python3 bench/fit_bench.py report --device-json RAW/device.json \\
        --prepare-json .dev-bench/fit/prepare.json --json-out RAW/fit.json
"""

import argparse
import glob
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, os.path.join(REPO, "python", "models"))

from fit_bench.search import search  # noqa: E402
from train_bench.configs import OPTIMIZERS, SEED, input_name, make_batch  # noqa: E402

GIB = 2**30
# name: graph (train_bench's export, or "llama:" + llama_graph config), exported batch,
#       sequence / image size, classes, global batch, precision, optimizer, budgets (GiB)
MODELS = {
    "gpt2_medium": {"graph": "gpt2_medium_b4", "batch": 4, "size": 1024, "classes": 50257,
                    "global_batch": 32, "precision": "bf16", "optimizer": "adamw",
                    "budgets": (8, 16, 24, 40), "runs": 5},
    "resnet50": {"graph": "resnet50_b64", "batch": 64, "size": 224, "classes": 1000,
                 "global_batch": 256, "precision": "bf16", "optimizer": "sgd",
                 "budgets": (8, 16, 24, 40), "runs": 5},
    "llama_1b": {"graph": "llama:tinyllama", "batch": 4, "size": 1024, "classes": 32000,
                 "global_batch": 16, "precision": "bf16", "optimizer": "adamw",
                 "budgets": (8,), "runs": 3, "offload": True},
    # Issue 27's "7B-shaped on one 80 GB GPU": Llama-2-7B's shape, 8 x 2048 tokens a step.
    # Its generated weights are 27 GB under prepare's --work (delete them when done); not in
    # the default --models.
    "llama_7b": {"graph": "llama:llama2-7b", "batch": 2, "size": 2048, "classes": 32000,
                 "global_batch": 8, "precision": "bf16", "optimizer": "adamw",
                 "budgets": (80,), "runs": 2, "offload": True},
}
LLAMA_CONFIGS = {"llama_1b": "tinyllama", "llama_7b": "llama2-7b"}
DEFAULT_MODELS = ("gpt2_medium", "resnet50", "llama_1b")
SWEEP = ("gpt2_medium", "resnet50")
# ZeRO-Offload (Ren et al., USENIX ATC 2021): 40 TFLOP/s per V100 for a 13B model with its
# optimizer on the CPU; the fallback reference when torchao is not on the device.
ZERO_OFFLOAD_TFLOPS = 40.0


def program_key(model, budget):
    return f"{model}.{budget}GiB"


def torch_model(name):
    """train_bench's model name of a MODELS entry (its PyTorch module and input batch)."""
    spec = MODELS[name]
    return name if spec["graph"].startswith("llama:") else spec["graph"].split("_b")[0]


def flops_per_sample(model):
    """6 x parameters x tokens (the transformer rule of thumb; for the Llama reference only)."""
    import llama_graph

    config = llama_graph.CONFIGS[LLAMA_CONFIGS[model]]
    return 6 * llama_graph.parameter_count(config) * MODELS[model]["size"]


# ----------------------------------------------------------------------------------------------
# export (GPU machine: torch)


def cmd_export(args):
    """train_bench's exporter for the sweep's two graphs, then the graph files alone (prepare
    fills the weights here) into OUT/graphs.tar.xz, as data_parallel_bench's export."""
    work = "/tmp/fit_bench_graphs"
    graphs = sorted({MODELS[m]["graph"] for m in SWEEP})
    code = subprocess.run([sys.executable, os.path.join(REPO, "bench", "train_bench.py"),
                           "export", "--out", work, "--only", *graphs]).returncode
    os.makedirs(args.out, exist_ok=True)
    with tarfile.open(os.path.join(args.out, "graphs.tar.xz"), "w:xz") as tar:
        for path in sorted(glob.glob(os.path.join(work, "*.onnx"))):
            tar.add(path, arcname=os.path.basename(path))
        if os.path.exists(os.path.join(work, "export_log.txt")):
            tar.add(os.path.join(work, "export_log.txt"), arcname="export_log.txt")
    return code


# ----------------------------------------------------------------------------------------------
# prepare (here)


def prepared_graph(name, spec, exported, work):
    """The batch-free, weight-filled graph of one model."""
    from fit_bench.graphs import batch_free

    folder = os.path.join(work, "graphs")
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, f"{name}.batchfree.onnx")
    if os.path.exists(out):
        return out
    if spec["graph"].startswith("llama:"):
        import llama_graph

        config = spec["graph"].split(":", 1)[1]
        source = llama_graph.generate(llama_graph.CONFIGS[config], os.path.join(work, "llama"),
                                      spec["batch"], spec["size"], config)
    else:
        filled = os.path.join(work, "filled")
        source = os.path.join(filled, spec["graph"] + ".onnx")
        if not os.path.exists(source):
            subprocess.run([sys.executable, os.path.join(REPO, "python", "models",
                                                         "fill_weights.py"),
                            os.path.join(exported, spec["graph"] + ".onnx"), filled],
                           check=True, capture_output=True)
    count = batch_free(source, out, spec["batch"], spec["size"] if spec["size"] != 224 else 1)
    print(f"{name}: {count} batch-dependent targets rewritten ({out})", flush=True)
    return out


def compile_command(compile_bin, graph, name, spec, budget, out, offload, kernel_times=None):
    from train_bench.prepare import frozen_constants

    command = [compile_bin, graph, "--train", "--loss", "cross-entropy", "--loss-output",
               "logits", *OPTIMIZERS[spec["optimizer"]], "--target", "cuda", "--arch", "sm_90",
               "--emit", "source", "-o", out, "--report", out + ".report.json",
               "--precision", spec["precision"], "--fit-precisions", spec["precision"],
               "--fit", f"{budget}GiB", "--global-batch", str(spec["global_batch"])]
    if name == "resnet50":
        command.append("--bn-batch-stats")
    if offload:
        command += ["--offload", "optimizer"]
    if kernel_times:
        # A device run's --profile-times (device --profile): --fit scales its measured
        # times to every micro-batch it plans (docs/fit.md, "Predicted time").
        command += ["--remat-kernel-times", kernel_times]
    frozen = frozen_constants(graph)
    if frozen:
        command += ["--freeze", ",".join(frozen)]
    return command


def fit_summary(report):
    """The report's fit section without the plans: every point's configuration and figures."""
    fit = report.get("fit") or {}
    keep = ("choices", "micro_batch", "accumulate", "device_bytes", "arena_bytes",
            "weight_bytes", "recomputations", "step_seconds", "samples_per_second", "fits",
            "pareto", "failure", "arena_budget_bytes")
    points = [{k: p[k] for k in keep if k in p} for p in fit.get("points", [])]
    chosen = fit.get("chosen")
    return {"limit_bytes": fit.get("limit_bytes"), "global_batch": fit.get("global_batch"),
            "time_source": fit.get("time_source"), "levers": fit.get("levers"),
            "chosen": chosen, "points": points,
            "chosen_point": points[chosen] if isinstance(chosen, int) and
            chosen < len(points) else None,
            "offload": report.get("offload"), "arena_bytes": report.get("arena_bytes"),
            "weights_bytes": report.get("weights_bytes")}


def compile_one(command, out, timeout):
    # The weights file (parameters and optimizer state: 15 GB for the Llama) is not needed
    # (the device runs --random-weights): written into /dev/null.
    for suffix in (".weights", ".onnx-template"):
        if os.path.lexists(out + suffix):
            os.remove(out + suffix)
    os.symlink(os.devnull, out + ".weights")
    begin = time.time()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        code, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        code, text = -1, f"memopt-compile stopped after {timeout} s"
    for suffix in (".weights", ".onnx-template"):  # --random-weights on the device
        if os.path.lexists(out + suffix):
            os.remove(out + suffix)
    entry = {"compile_s": round(time.time() - begin, 1), "command": " ".join(command[1:])}
    entry["fit_log"] = [line for line in text.splitlines() if line.startswith(("[fit]", "  "))
                        and ("[fit]" in line or "micro-batch" in line)][:40]
    if code != 0:
        entry["error"] = text.strip()[-1500:]
    else:
        entry["fit"] = fit_summary(json.load(open(out + ".report.json")))
    return entry


def cmd_prepare(args):
    dest, work = os.path.abspath(args.dest), os.path.abspath(args.work)
    programs = os.path.join(dest, "programs")
    os.makedirs(programs, exist_ok=True)
    exported = os.path.join(work, "exported")
    if args.graphs.endswith(".tar.xz"):
        if not os.path.isdir(exported):
            with tarfile.open(args.graphs) as tar:
                tar.extractall(exported, filter="data")
    else:
        exported = args.graphs
    summary_path = os.path.join(dest, "prepare.json")
    summary = json.load(open(summary_path)) if os.path.exists(summary_path) else {}
    summary.setdefault("programs", {})
    import data_parallel_bench

    summary["commit"] = data_parallel_bench.runtime_sources(dest)
    summary["models"] = {m: {k: v for k, v in MODELS[m].items()} for m in args.models}

    def write():
        with open(summary_path, "w") as handle:
            json.dump(summary, handle, indent=1)

    def compiled(key):
        return (not args.force and "fit" in summary["programs"].get(key, {}) and
                os.path.exists(os.path.join(programs, key + ".cu.xz")))

    for name in args.models:
        spec = MODELS[name]
        if all(compiled(program_key(name, b)) for b in (args.budgets or spec["budgets"])):
            continue  # compiled by an earlier prepare of the same carry
        try:
            graph = prepared_graph(name, spec, exported, work)
        except Exception as error:  # noqa: BLE001 - recorded, the other models go on
            for budget in spec["budgets"]:
                summary["programs"][program_key(name, budget)] = {"error": f"graph: {error}"}
            write()
            continue
        for budget in (args.budgets or spec["budgets"]):
            if budget not in spec["budgets"] and not args.budgets:
                continue
            key = program_key(name, budget)
            if compiled(key):
                continue
            out = os.path.join(work, "programs", key)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            # Plain --fit first: offload is one of its levers, so it picks offload itself;
            # the explicit --offload optimizer is a fallback kept for older compilers.
            times = (os.path.join(args.kernel_times, key + ".times.json")
                     if args.kernel_times else None)
            if times and not os.path.exists(times):
                times = None
            entry = compile_one(compile_command(args.compile, graph, name, spec, budget, out,
                                                False, times), out, args.timeout_s)
            if "error" in entry and spec.get("offload"):
                plain = entry
                entry = compile_one(compile_command(args.compile, graph, name, spec, budget,
                                                    out, True, times), out, args.timeout_s)
                entry["without_offload"] = {k: plain[k] for k in ("compile_s", "error")}
                entry["offload_flag"] = True
            if "fit" in entry:
                with lzma.open(os.path.join(programs, key + ".cu.xz"), "wb", preset=6) as handle:
                    handle.write(open(out + ".cu", "rb").read())
                point = entry["fit"]["chosen_point"] or {}
                print(f"{key}: {entry['compile_s']:.0f} s, chosen micro-batch "
                      f"{point.get('micro_batch')} x {point.get('accumulate')}, "
                      f"{point.get('device_bytes', 0) / GIB:.2f} GiB, predicted "
                      f"{point.get('samples_per_second', 0):.1f} samples/s", flush=True)
            else:
                print(f"{key}: no fit ({entry['compile_s']:.0f} s): {entry['error'][-400:]}",
                      flush=True)
            summary["programs"][key] = entry
            write()
    # Identical programs (two budgets choosing the same configuration) are built once.
    sources = {}
    for key in sorted(summary["programs"]):
        path = os.path.join(programs, key + ".cu.xz")
        summary["programs"][key].pop("same_program_as", None)
        if os.path.exists(path) and "error" not in summary["programs"][key]:
            text = lzma.open(path).read()
            if text in sources:
                summary["programs"][key]["same_program_as"] = sources[text]
            else:
                sources[text] = key
    if args.wheels and os.path.isdir(args.wheels):  # torchao (the device has no registry)
        os.makedirs(os.path.join(dest, "whl"), exist_ok=True)
        for wheel in glob.glob(os.path.join(args.wheels, "*.whl")):
            shutil.copy(wheel, os.path.join(dest, "whl"))
    # The runtime libraries compressed (34 MB -> 4.5 MB of the 64 MiB a device call carries);
    # data_parallel_bench.build_programs unpacks them.
    shutil.rmtree(os.path.join(dest, "rt"), ignore_errors=True)
    with tarfile.open(os.path.join(dest, "rt.tar.xz"), "w:xz") as tar:
        for lib in ("cuda", "main", "driver", "common"):
            name = f"libmemopt_runtime_{lib}.a"
            tar.add(os.path.join(args.runtime, name), arcname=os.path.join("rt", name))
    write()
    total = sum(os.path.getsize(f) for f in glob.glob(os.path.join(dest, "**"), recursive=True)
                if os.path.isfile(f))
    print(f"carry folder {dest}: {total / 2**20:.1f} MiB")
    return 0


# ----------------------------------------------------------------------------------------------
# device (GPU machine)


def run_program(key, exe, name, work, env, timeout, profile_dir=None):
    from train_bench.device import parse_bench, run_streamed
    import numpy as np

    spec, model = MODELS[name], torch_model(name)
    inputs = os.path.join(work, "inputs", model)
    if not os.path.exists(inputs + ".y.npy"):
        os.makedirs(os.path.dirname(inputs), exist_ok=True)
        x, y = make_batch(model, spec["global_batch"], spec["size"], spec["classes"])
        np.save(inputs + ".x.npy", x)
        np.save(inputs + ".y.npy", y)
    command = [exe, "--random-weights", str(SEED), "--input",
               f"{input_name(model)}={inputs}.x.npy", "--input", f"labels={inputs}.y.npy",
               "--steps", "0", "--bench", str(spec["runs"])]
    begin = time.time()
    code, text, _ = run_streamed(command, timeout, env)
    entry = {"exit": code, "wall_s": round(time.time() - begin, 1)}
    entry.update(parse_bench(text))
    if "median_ms" in entry:
        entry["samples_per_s"] = spec["global_batch"] / (entry["median_ms"] / 1000)
    if code != 0:
        entry["error"] = text[-2500:]
    elif profile_dir:
        # A second run, every op timed (CUDA runs eagerly then): the top of the table and the
        # times JSON (with "<copy 1 GiB>" / "<host update 1 GiB>" when the program offloads),
        # which --remat-kernel-times reads.
        times = os.path.join(profile_dir, key + ".times.json")
        code, text, _ = run_streamed(command[:-4] + ["--steps", "2", "--profile",
                                                     "--profile-times", times], timeout, env)
        entry["profile"] = {"exit": code, "table": text[-6000:]}
    return entry


def torch_child(model, budgets, deadline, out, env, say, extra=()):
    """One child process per model (`torch-search`); killed at the deadline, its JSON (written
    after every trial) keeps what it measured."""
    command = [sys.executable, os.path.abspath(__file__), "torch-search", "--model", model,
               "--out", out, "--deadline", str(deadline), "--budgets",
               *[str(b) for b in budgets], *extra]
    left = deadline - time.time() + 15
    begin = time.time()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, env=env,
                              timeout=max(5, left))
        code, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as error:
        code, text = -1, f"stopped at the deadline\n{error.stdout or ''}"
    say(f"torch {model}: exit {code} in {time.time() - begin:.0f} s\n{text[-3000:]}")
    try:
        data = json.load(open(out)) if os.path.exists(out) else {}
    except ValueError as error:
        data = {"json_error": str(error)}
    if code != 0:
        data["exit"], data["log_tail"] = code, text[-2500:]
    return data


def cmd_device(args):
    begin_all = time.time()
    deadline = begin_all + args.deadline_s
    carry, out, work = os.path.abspath(args.carry), os.path.abspath(args.out), args.work
    os.makedirs(out, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    from train_bench.configs import log_to

    say = log_to(os.path.join(out, "device_log.txt"))
    say(f"fit_bench device: carry {carry}, deadline {args.deadline_s} s")
    import gpu_bench

    results = {"memopt": {}, "torch": {}, "skipped": [],
               "settings": {"deadline_s": args.deadline_s}}
    try:
        results["environment"] = gpu_bench.torch_environment()
    except Exception as error:  # noqa: BLE001 - recorded, the run goes on
        results["environment"] = {"error": f"{type(error).__name__}: {error}"}
    path = os.path.join(out, "device.json")

    def save():
        results["seconds"] = round(time.time() - begin_all, 1)
        with open(path, "w") as handle:
            json.dump(results, handle, indent=1)

    import data_parallel_bench

    env = data_parallel_bench.launch_environment(work)
    wheels = sorted(glob.glob(os.path.join(carry, "whl", "*.whl")))
    if wheels:  # carried packages (torchao) for the PyTorch children
        site = os.path.join(work, "site")
        # The GPU machine reaches no network: pip must not look for an index or a newer pip
        # (the first device call, 2026-11-28, printed nothing in 450 s: a pip or CUDA probe
        # without a timeout is the likely hang), and nothing here waits without a limit.
        quiet_pip = dict(env, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1",
                         PIP_NO_INPUT="1")
        try:
            proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index",
                                   "--no-deps", "--no-compile", "--upgrade", "--target", site,
                                   *wheels], capture_output=True, text=True, env=quiet_pip,
                                  timeout=120)
            code, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            code, text = -1, "pip install stopped after 120 s"
        results["wheels"] = {"installed": [os.path.basename(w) for w in wheels],
                             "exit": code, "log": text[-800:]}
        say(f"carried wheels: exit {code}")
        if code == 0:
            env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    # The device memory a bare CUDA context takes (the executable's device peak includes its
    # own; neither --fit nor PyTorch's memory fraction counts it).
    try:
        probe = subprocess.run([sys.executable, "-c", "import torch; torch.zeros(1, device='cuda'); "
                                "f, t = torch.cuda.mem_get_info(); print(t - f)"],
                               capture_output=True, text=True, env=env, timeout=120)
        if probe.returncode == 0 and probe.stdout.strip().isdigit():
            results["context_bytes"] = int(probe.stdout.strip())
    except subprocess.TimeoutExpired:
        results["context_bytes_error"] = "the CUDA context probe stopped after 120 s"
    say(f"bare CUDA context: {results.get('context_bytes', 'unknown')} bytes")
    save()
    summary = json.load(open(os.path.join(carry, "prepare.json")))
    models = args.models
    keys = [program_key(m, b) for m in models for b in MODELS[m]["budgets"]]
    for key in keys:
        entry = summary["programs"].get(key, {"error": "not prepared"})
        if "error" in entry:
            results["memopt"][key] = {"no_fit": entry["error"][-600:]}
    if args.programs:
        keys = [k for k in keys if k in args.programs]
    if not args.skip_memopt:
        # Executables built here carried as carry/exe/KEY.xz (nvcc on a 1.7 MB generated
        # program can take minutes on the device) are used as they are; the rest are built.
        prebuilt = {}
        for key in keys:
            base = summary["programs"].get(key, {}).get("same_program_as") or key
            packed = os.path.join(carry, "exe", base + ".xz")
            if os.path.exists(packed):
                exe = os.path.join(work, "bin", base)
                os.makedirs(os.path.dirname(exe), exist_ok=True)
                with lzma.open(packed) as source, open(exe, "wb") as target:
                    shutil.copyfileobj(source, target)
                os.chmod(exe, 0o755)
                prebuilt[key] = exe
        say(f"carried executables: {sorted(prebuilt) or 'none'}")
        try:
            exes, failed = data_parallel_bench.build_programs(
                carry, work, [k for k in keys if k not in prebuilt], summary, say, deadline - 90)
        except Exception as error:  # noqa: BLE001 - recorded; PyTorch still runs
            exes, failed = {}, {k: f"build: {error}" for k in keys if k not in prebuilt}
        exes.update(prebuilt)
        for key, text in failed.items():
            results["memopt"][key] = {"build_error": text[-1500:]}
        save()
        for key in keys:
            if key not in exes:
                continue
            model = key.split(".")[0]
            same = summary["programs"][key].get("same_program_as")
            if same and "median_ms" in results["memopt"].get(same, {}):
                # Two budgets chose the same program: measured once, and its profile is
                # this budget's too (a later prepare --kernel-times reads KEY.times.json).
                results["memopt"][key] = dict(results["memopt"][same], same_program_as=same)
                measured = os.path.join(out, same + ".times.json")
                if args.profile and os.path.exists(measured):
                    shutil.copy(measured, os.path.join(out, key + ".times.json"))
                continue
            if time.time() > deadline - 60:
                results["skipped"].append(f"memopt {key}: deadline")
                continue
            try:
                entry = run_program(key, exes[key], model, work, env,
                                    min(args.run_timeout_s, deadline - time.time() - 30),
                                    out if args.profile else None)
            except Exception as error:  # noqa: BLE001
                entry = {"error": f"{type(error).__name__}: {error}"}
            results["memopt"][key] = entry
            say(f"memopt {key}: exit {entry.get('exit')}, {entry.get('median_ms', 0):.1f} ms, "
                f"{entry.get('samples_per_s', 0):.1f} samples/s, device peak used "
                f"{entry.get('device_peak_used_bytes', 0) / GIB:.2f} GiB"
                + ("" if "error" not in entry else "\n" + entry["error"][-1200:]))
            save()
    if not args.skip_torch:
        # The sweep first (GPT-2 medium, then ResNet-50), then the larger-than-GPU
        # comparison with what is left; each child gets a share of the time left.
        order = [m for m in SWEEP + tuple(LLAMA_CONFIGS) if m in models]
        shares = {"gpt2_medium": 0.45, "resnet50": 0.55}
        for i, model in enumerate(order):
            left = deadline - time.time() - 10
            if left < 40:
                results["skipped"].append(f"torch {model}: deadline")
                continue
            share = left if i == len(order) - 1 else left * shares.get(model, 0.5)
            target = os.path.join(work, f"torch_{model}.json")
            if os.path.exists(target):
                os.remove(target)
            try:
                results["torch"][model] = torch_child(
                    model, MODELS[model]["budgets"], time.time() + share, target, env, say)
            except Exception as error:  # noqa: BLE001 - recorded, the next model goes on
                results["torch"][model] = {"error": f"{type(error).__name__}: {error}"}
            save()
    save()
    return 0


def cmd_torch_search(args):
    import torch

    from fit_bench.torch_side import Runner, save

    spec, model = MODELS[args.model], torch_model(args.model)
    data = {"model": args.model, "global_batch": spec["global_batch"], "trials": {}}
    budgets = [b * GIB for b in args.budgets]
    out_of_time = lambda: time.time() > args.deadline - 20  # noqa: E731
    if spec.get("offload"):
        # Plain PyTorch (everything on the GPU), then torchao's CPU offload optimizer: f32
        # parameters with the gradients freed on the GPU as they reach the host (no
        # accumulation then), and bf16 parameters with accumulation on the GPU.
        variants = [("plain", {})]
        try:
            import torchao  # noqa: F401

            data["torchao"] = getattr(torchao, "__version__", "?")
            variants += [("torchao", {"offload": "torchao", "offload_gradients": True}),
                         ("torchao_bf16", {"offload": "torchao", "param_dtype": "bf16"})]
        except Exception as error:  # noqa: BLE001
            data["torchao"] = None
            data["torchao_error"] = f"{type(error).__name__}: {error}"
        module = None
        for name, options in variants:
            if out_of_time():
                data["trials"][name] = {"skipped": "deadline"}
                continue
            runner = None
            try:
                runner = Runner(model, spec["global_batch"], spec["size"], spec["classes"],
                                spec["optimizer"], spec["precision"], runs=2, module=module,
                                **options)
                module = runner.module
                data.setdefault("optimizer", {})[name] = runner.optimizer_name
                result = search(runner, spec["global_batch"], budgets, compile_budgets=(),
                                out_of_time=out_of_time)
                data["trials"][name] = {str(b // GIB): r for b, r in result.items()}
            except Exception as error:  # noqa: BLE001
                data["trials"][name] = {"error": f"{type(error).__name__}: {str(error)[:800]}"}
            if runner is not None:
                runner.release()
            runner = None
            torch.cuda.empty_cache()
            save(args.out, data)
        return 0
    runner = Runner(model, spec["global_batch"], spec["size"], spec["classes"],
                    spec["optimizer"], spec["precision"], runs=3)
    data["optimizer"] = runner.optimizer_name
    data["checkpointed_blocks"] = runner.blocks

    def run(trial, budget):
        result = runner(trial, budget)
        print(f"{args.model} {budget // GIB} GiB {trial}: {result.get('status')} "
              f"{result.get('samples_per_s', 0):.1f} samples/s "
              f"{result.get('peak_bytes', 0) / GIB:.2f} GiB", flush=True)
        data.setdefault("live", {}).setdefault(str(budget // GIB), []).append(
            dict(result, trial=trial))  # kept if the deadline stops the search
        save(args.out, data)
        return result

    result = search(run, spec["global_batch"], budgets, out_of_time=out_of_time)
    data["trials"] = {str(b // GIB): r for b, r in result.items()}
    save(args.out, data)
    return 0


# ----------------------------------------------------------------------------------------------
# report (here)


def config_text(point):
    if not point:
        return ""
    text = f"{(point.get('choices') or {}).get('precision', '')} {point.get('micro_batch')} x " \
        f"{point.get('accumulate')}"
    if point.get("recomputations"):
        text += f", {point['recomputations']} recomputed"
    for lever, value in (point.get("choices") or {}).items():
        if lever != "precision":
            text += f", {lever} {value}"
    return text.strip()


def torch_trials(data, budget):
    """{trial key: result} under one budget: the finished search's, else the live list."""
    tried = ((data.get("trials") or {}).get(str(budget)) or {})
    if isinstance(tried, dict) and "tried" in tried:
        return tried["tried"], tried.get("best")
    live = (data.get("live") or {}).get(str(budget)) or []
    from fit_bench.search import trial_key

    tried = {trial_key(r["trial"]): r for r in live if "trial" in r}
    ran = {k: r for k, r in tried.items() if r.get("status") == "ran"}
    return tried, (max(ran, key=lambda k: ran[k]["samples_per_s"]) if ran else None)


def memopt_row(key, prepare, device, budget):
    entry = prepare.get("programs", {}).get(key, {})
    run = device.get("memopt", {}).get(key, {})
    point = (entry.get("fit") or {}).get("chosen_point") or {}
    row = {"memopt_config": config_text(point) or None,
           "offload_flag": bool(entry.get("offload_flag")),
           "predicted_samples_per_s": point.get("samples_per_second"),
           "predicted_step_ms": (point.get("step_seconds") or 0) * 1000 or None,
           "planned_device_bytes": point.get("device_bytes"),
           "compile_s": entry.get("compile_s")}
    if "error" in entry:
        row["memopt_status"] = "no fit"
        row["memopt_error"] = " ".join(entry["error"].split())[-300:]
    if "median_ms" in run:
        peak = run.get("device_peak_used_bytes")
        program = sum(run.get(k, 0) for k in ("weight_bytes", "arena_bytes", "io_bytes",
                                              "workspace_bytes"))
        context = device.get("context_bytes")
        # Within the budget: the program's own bytes (weights and state, arena, inputs and
        # outputs, workspaces) and, where the context was measured, the device's peak used
        # less a bare CUDA context's bytes.
        checks = [b <= budget * GIB for b in (program or None,
                                              peak - context if peak and context else None)
                  if b is not None]
        row.update(memopt_samples_per_s=run["samples_per_s"], memopt_step_ms=run["median_ms"],
                   memopt_device_peak_bytes=peak, memopt_program_bytes=program or None,
                   memopt_peak_less_context_bytes=peak - context if peak and context else None,
                   memopt_within_budget=all(checks) if checks else None)
        if row["predicted_step_ms"]:
            row["predicted_over_measured"] = row["predicted_step_ms"] / run["median_ms"]
        row["memopt_status"] = "ran"
    elif run and "no_fit" not in run:
        row["memopt_status"] = "failed"
        row["memopt_error"] = " ".join(str(run.get("error") or run.get("build_error") or
                                           run).split())[-300:]
    return row


def build_report(prepare, device):
    report = {"environment": device.get("environment"), "commit": prepare.get("commit"),
              "skipped": device.get("skipped", []), "sweep": {}, "trials": {}, "large": {}}
    for model in MODELS:
        spec = MODELS[model]
        data = device.get("torch", {}).get(model, {})
        for budget in spec["budgets"]:
            key = program_key(model, budget)
            row = {"model": model, "budget_gib": budget, "global_batch": spec["global_batch"]}
            row.update(memopt_row(key, prepare, device, budget))
            if spec.get("offload"):
                for variant in ("plain", "torchao", "torchao_bf16"):
                    tried, best = torch_trials({"trials": (data.get("trials") or {}).get(
                        variant) or {}}, budget)
                    for name, result in tried.items():
                        report["trials"][f"{key}.{variant}.{name}"] = trial_row(result)
                    if best:
                        row[f"torch_{variant}_samples_per_s"] = tried[best]["samples_per_s"]
                        row[f"torch_{variant}_config"] = best
                row["torchao"] = data.get("torchao") if "torchao" in data else "not run"
                # ZeRO-Offload's 40 TFLOP/s per GPU at this model's 6 x N FLOPs a token: the
                # reference where torchao is not on the device.
                row["zero_offload_reference_samples_per_s"] = (
                    ZERO_OFFLOAD_TFLOPS * 1e12 / flops_per_sample(model))
                offloaded = [row[k] for k in ("torch_torchao_samples_per_s",
                                              "torch_torchao_bf16_samples_per_s") if k in row]
                if row.get("memopt_samples_per_s") and offloaded:
                    row["speed_ratio"] = row["memopt_samples_per_s"] / max(offloaded)
                report["large"][key] = row
                continue
            tried, best = torch_trials(data, budget)
            for name, result in tried.items():
                report["trials"][f"{key}.{name}"] = trial_row(result)
            if best:
                row["torch_samples_per_s"] = tried[best]["samples_per_s"]
                row["torch_config"] = best
                row["torch_peak_bytes"] = tried[best].get("peak_bytes")
            elif tried:
                row["torch_config"] = "no PyTorch config fits"
            if row.get("memopt_samples_per_s") and row.get("torch_samples_per_s"):
                row["speed_ratio"] = row["memopt_samples_per_s"] / row["torch_samples_per_s"]
            report["sweep"][key] = row
    return report


def trial_row(result):
    return {k: result.get(k) for k in ("status", "samples_per_s", "median_ms", "peak_bytes",
                                       "measured_under", "seconds")
            if result.get(k) is not None} | (
        {"error": result["error"][:200]} if result.get("status") == "error" else {})


def print_table(report, out=sys.stdout):
    def num(v, fmt="{:.1f}"):
        return "" if v is None else fmt.format(v)

    out.write("| model | budget | memopt samples/s | memopt peak (GiB) | memopt config | "
              "predicted / measured | PyTorch best samples/s | PyTorch config | speed ratio |\n")
    out.write("| --- | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: |\n")
    for row in list(report["sweep"].values()) + list(report["large"].values()):
        peak = row.get("memopt_device_peak_bytes") or row.get("memopt_program_bytes")
        torch_sps, torch_cfg = row.get("torch_samples_per_s"), row.get("torch_config") or ""
        for variant in ("torchao", "torchao_bf16"):
            if (row.get(f"torch_{variant}_samples_per_s") or 0) > (torch_sps or 0):
                torch_sps = row[f"torch_{variant}_samples_per_s"]
                torch_cfg = f"{variant}: {row[f'torch_{variant}_config']}"
        if "torchao" in row and row.get("torchao") is None:
            torch_cfg = (f"torchao not on the device; ZeRO-Offload paper: "
                         f"{row['zero_offload_reference_samples_per_s']:.1f} samples/s")
        memopt = num(row.get("memopt_samples_per_s")) or row.get("memopt_status", "")
        out.write(f"| {row['model']} | {row['budget_gib']} GiB | {memopt} | "
                  f"{num(peak / GIB if peak else None, '{:.2f}')} | "
                  f"{row.get('memopt_config') or ''} | "
                  f"{num(row.get('predicted_over_measured'), '{:.2f}')} | {num(torch_sps)} | "
                  f"{torch_cfg} | {num(row.get('speed_ratio'), '{:.2f}x')} |\n")


def cmd_report(args):
    prepare = json.load(open(args.prepare_json))
    device = {"memopt": {}, "torch": {}}
    for path in args.device_json:  # a later call's figures win where it has them
        data = json.load(open(path))
        device["environment"] = data.get("environment") or device.get("environment")
        device["context_bytes"] = data.get("context_bytes") or device.get("context_bytes")
        device.setdefault("skipped", []).extend(data.get("skipped", []))
        for side in ("memopt", "torch"):
            for key, entry in data.get(side, {}).items():
                if ("median_ms" in entry or "trials" in entry or "live" in entry or
                        key not in device[side]):
                    device[side][key] = entry
    report = build_report(prepare, device)
    if args.json_out:
        with open(args.json_out, "w") as handle:
            json.dump(report, handle, indent=1)
    print_table(report)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("--out", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--graphs", required=True, help="train_bench's exported graphs: a folder "
                   "or graphs.tar.xz (gpt2_medium_b4, resnet50_b64)")
    p.add_argument("--dest", required=True, help="the carry folder")
    p.add_argument("--work", default="/tmp/fit_bench_work")
    p.add_argument("--compile", default=os.path.join(REPO, "build", "bin", "memopt-compile"))
    p.add_argument("--runtime", default=os.path.join(REPO, "build", "lib", "Runtime"),
                   help="folder of libmemopt_runtime_{cuda,main,driver,common}.a")
    p.add_argument("--models", nargs="*", default=list(DEFAULT_MODELS), choices=list(MODELS))
    p.add_argument("--budgets", nargs="*", type=int, help="GiB (default: each model's)")
    p.add_argument("--timeout-s", type=float, default=1800)
    p.add_argument("--force", action="store_true")
    p.add_argument("--kernel-times", help="a device --profile output folder: KEY.times.json "
                   "there is given to that program's --fit as --remat-kernel-times")
    p.add_argument("--wheels", help="a folder of wheels to carry and install on the device "
                   "(torchao: python3 -m pip download --no-deps --only-binary=:all: "
                   "--python-version 3.12 --implementation cp --platform "
                   "manylinux_2_28_x86_64 -d DIR torchao==0.18.0)")
    p = sub.add_parser("device")
    p.add_argument("--carry", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/fit_bench")
    p.add_argument("--models", nargs="*", default=list(DEFAULT_MODELS), choices=list(MODELS))
    p.add_argument("--deadline-s", type=float, default=560)
    p.add_argument("--run-timeout-s", type=float, default=90)
    p.add_argument("--skip-memopt", action="store_true")
    p.add_argument("--skip-torch", action="store_true")
    p.add_argument("--programs", nargs="*", help="only these memopt programs (KEY: model.NGiB)")
    p.add_argument("--profile", action="store_true", help="after each memopt run, one more "
                   "with --profile (its table in device.json) and --profile-times OUT/KEY.times.json")
    p = sub.add_parser("torch-search")
    p.add_argument("--model", required=True, choices=list(MODELS))
    p.add_argument("--out", required=True)
    p.add_argument("--deadline", type=float, required=True, help="time.time() to stop at")
    p.add_argument("--budgets", nargs="+", type=int, required=True)
    p = sub.add_parser("report")
    p.add_argument("--device-json", nargs="+", required=True)
    p.add_argument("--prepare-json", required=True)
    p.add_argument("--json-out")
    args = parser.parse_args()
    return {"export": cmd_export, "prepare": cmd_prepare, "device": cmd_device,
            "torch-search": cmd_torch_search, "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
