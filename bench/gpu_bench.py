#!/usr/bin/env python3
"""GPU benchmark: memopt's CUDA executables against PyTorch eager and torch.compile (issue 4).

Five models at inference, each at batch 1 and at a realistic batch, fp32 with TF32 off on both
sides: ResNet-50, MobileNetV3-large and ViT-B/16 (1 and 32 images of 3x224x224), BERT-base and
GPT-2 small (1 x 512 and 8 x 512 tokens). For each: peak device memory beyond the weights,
median latency, and memopt's CUDA output compared with its host backend.

memopt-compile needs MLIR, which only the development machine has; PyTorch 2.x, transformers
and the GPU only the device machine has. So the benchmark is split in steps:

  export   (device)  exports the ten graphs with torch.onnx's dynamo exporter, packs the graph
                     files without their weights into OUT/graphs.tar.gz
  torch    (device)  PyTorch eager and torch.compile timings and memory -> JSON
  prepare  (here)    fills the graphs' weights (fill_weights.py), compiles each with
                     memopt-compile --target cuda --emit source into the carry folder, and copies
                     the runtime's source tree there
  device   (device)  builds the runtime standalone (with scripts/gpu_check.sh's checks) and every
                     program (CUDA and host); runs the host executables while the GPU is idle
                     (batch 1 first, until a cap), then the CUDA executables (--bench) one at a
                     time, then the PyTorch baselines in the same run; compares CUDA with host
                     outputs on the same seed and inputs -> JSON
  extra    (device)  a later call: Nsight Compute kernel profiles of memopt's eager run, and
                     host checks the first call had no time for
  report   (here)    docs/gpu-benchmark.md and gpu.json from the JSON files (bench/run.py's
                     suite `gpu` records gpu.json in bench/results/gpu/)

The device machine receives /work/main's checkout: everything it needs goes into the
git-ignored carry folder .dev-bench (carry=[".dev-bench"], each command starts with
`cd .dev-bench`). The run behind docs/gpu-benchmark.md:

    python3 bench/gpu_bench.py prepare --dest /work/main/.dev-bench --src-only
    # device: python3 src/bench/gpu_bench.py export --out $OUT  (and `torch`, to warm Inductor's
    #         cache; $OUT/inductor.tar.gz goes into .dev-bench for the next call)
    python3 bench/gpu_bench.py prepare --graphs graphs.tar.gz --dest /work/main/.dev-bench
    # device: python3 src/bench/gpu_bench.py device --out $OUT --profile --pack
    # device: python3 src/bench/gpu_bench.py extra --out $OUT --profile CONFIG... --host CONFIG...
    #         (with $OUT/built.tar.gz of the previous call in .dev-bench: relinks, no rebuild)
    python3 bench/gpu_bench.py report --device-json device.json --torch-json torch.json \
        --prepare-json prepare.json --extra-json extra*.json --notes bench/gpu_bench_notes.md

The JSON inputs of the committed report are in d9a817f:bench/results/gpu_raw/.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python", "models"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from device_env import cudnn_paths  # noqa: E402,F401 - gpu_bench_precision uses it too

VISION = ["resnet50", "mobilenet_v3_large", "vit_b_16"]
TEXT = ["bert_base", "gpt2"]
MODELS = VISION + TEXT
SEQ = 512
BATCHES = {"vision": (1, 32), "text": (1, 8)}
SEED = 1  # --random-weights and the input generator


def family(model):
    return "vision" if model in VISION else "text"


def configs(models=MODELS):
    """(config name, model, batch) for every model at batch 1 and its realistic batch."""
    return [(f"{m}_b{b}", m, b) for m in models for b in BATCHES[family(m)]]


def input_spec(model, batch):
    """(input name, shape, numpy dtype name) of the single graph input."""
    if family(model) == "vision":
        return "input", (batch, 3, 224, 224), "float32"
    return "input_ids", (batch, SEQ), "int64"


def vocab(model):
    return 30522 if model == "bert_base" else 50257


def make_input(model, batch):
    """The benchmark input, the same on every machine (numpy's generator seeded by SEED)."""
    import numpy as np

    name, shape, dtype = input_spec(model, batch)
    rng = np.random.default_rng(SEED)
    if dtype == "float32":
        return name, rng.standard_normal(shape).astype(np.float32)
    return name, rng.integers(0, vocab(model), size=shape, dtype=np.int64)


def log_to(path):
    handle = open(path, "a")

    def say(text):
        print(text, flush=True)
        handle.write(text + "\n")
        handle.flush()

    return say


# ----------------------------------------------------------------------------------------------
# PyTorch side (device machine)


def build_torch_model(model, attn=None):
    """The model in eval mode with random weights. attn: transformers' attn_implementation
    (None = the library default; the export uses "eager" so the graph is MatMul + Softmax)."""
    import torch

    torch.manual_seed(0)
    if model in VISION:
        import torchvision

        return getattr(torchvision.models, model)(weights=None).eval()
    import transformers

    extra = {"attn_implementation": attn} if attn else {}
    if model == "bert_base":
        config = transformers.BertConfig(**extra)  # 12 layers, 768, 12 heads, vocab 30522
        inner = transformers.BertModel(config, add_pooling_layer=False)
        field = "last_hidden_state"
    else:
        config = transformers.GPT2Config(**extra)  # 12 layers, 768, 12 heads, vocab 50257
        inner = transformers.GPT2LMHeadModel(config)
        field = "logits"

    class Wrapped(torch.nn.Module):
        """Plain tensor in, plain tensor out (no cache, no ModelOutput)."""

        def __init__(self):
            super().__init__()
            self.inner = inner
            self.attn_implementation = inner.config._attn_implementation

        def forward(self, input_ids):
            kwargs = {"use_cache": False} if field == "logits" else {}
            return getattr(self.inner(input_ids=input_ids, return_dict=True, **kwargs), field)

    return Wrapped().eval()


def output_name(model):
    return {"bert_base": "last_hidden_state", "gpt2": "logits"}.get(model, "logits")


def export_one(name, model, batch, work):
    """Exports one configuration (CPU) to work/NAME.onnx + external data."""
    import onnx
    import torch

    import export_common

    torch.set_num_threads(2)
    module = build_torch_model(model, attn="eager")
    input_name, array = make_input(model, batch)
    tmp_dir = tempfile.mkdtemp(prefix=f"export_{name}_")
    tmp = os.path.join(tmp_dir, f"{name}.onnx")
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(array),), tmp, dynamo=True,
                          external_data=True, input_names=[input_name],
                          output_names=[output_name(model)])
    proto = onnx.load(tmp)
    path = os.path.join(work, f"{name}.onnx")
    graph_bytes, data_bytes = export_common.save_with_external_data(proto, path)
    shutil.rmtree(tmp_dir, ignore_errors=True)
    ops = export_common.op_types(proto)
    print(json.dumps({"name": name, "graph_bytes": graph_bytes, "data_bytes": data_bytes,
                      "nodes": len(proto.graph.node), "ops": ops}))


def cmd_export(args):
    """Exports every configuration, `--jobs` at a time, each in its own process so that one
    failure leaves the others; packs the graph files (no .data) into OUT/graphs.tar.gz."""
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="gpu_bench_export_")
    say = log_to(os.path.join(args.out, "export_log.txt"))
    pending = [c for c in configs(args.models) if not args.only or c[0] in args.only]
    running, done, start = [], [], time.time()
    while pending or running:
        while pending and len(running) < args.jobs:
            name, model, batch = pending.pop(0)
            proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "export-one", name, model, str(batch),
                 work], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            running.append((name, proc, time.time()))
        time.sleep(0.5)
        for item in list(running):
            name, proc, begun = item
            if proc.poll() is None:
                continue
            running.remove(item)
            text = proc.stdout.read()
            if proc.returncode == 0:
                info = json.loads(text.strip().splitlines()[-1])
                done.append(name)
                say(f"ok   {name}: {info['nodes']} nodes, graph {info['graph_bytes']} B, "
                    f"data {info['data_bytes']} B, {time.time() - begun:.1f} s, "
                    f"ops {','.join(info['ops'])}")
            else:
                say(f"FAIL {name} (exit {proc.returncode}):\n{text[-3000:]}")
    archive = os.path.join(args.out, "graphs.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        for name in done:
            tar.add(os.path.join(work, f"{name}.onnx"), arcname=f"{name}.onnx")
    say(f"exported {len(done)} graphs in {time.time() - start:.1f} s -> {archive}")
    return 0 if done else 1


def torch_environment():
    import torch

    env = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(0)}
    for package in ("torchvision", "transformers", "onnx", "onnxscript"):
        try:
            env[package] = __import__(package).__version__
        except Exception as error:  # noqa: BLE001 - recorded, not fatal
            env[package] = f"unavailable ({error})"
    try:
        env["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return env


def top_kernels(prof, count=8):
    """The `count` kernels with the most device time in a torch.profiler run, per run."""
    rows = []
    for event in prof.key_averages():
        device_us = getattr(event, "self_device_time_total", None)
        if device_us is None:
            device_us = getattr(event, "self_cuda_time_total", 0)
        if device_us > 0 and event.key and not event.key.startswith("ProfilerStep"):
            rows.append((device_us, event.key, event.count))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    return {"total_us": total,
            "kernels": [{"name": key[:160], "us": us, "calls": calls}
                        for us, key, calls in rows[:count]]}


def torch_measure(fn, x, weight_bytes, runs, profile):
    """Peak memory beyond weights (max_memory_allocated during one run minus parameter and
    buffer bytes) and the median latency of `runs` runs (CUDA events, synchronized each run)."""
    import gc

    import torch

    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    y = fn(x)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    peak_reserved = torch.cuda.max_memory_reserved()
    del y
    for _ in range(10):
        fn(x)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(runs):
        start.record()
        fn(x)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    result = {"median_ms": statistics.median(times), "min_ms": min(times),
              "max_ms": max(times), "runs": runs,
              "peak_beyond_weights_bytes": peak - weight_bytes,
              "resident_before_bytes": before, "peak_allocated_bytes": peak,
              "peak_reserved_bytes": peak_reserved}
    if profile:
        from torch.profiler import ProfilerActivity, profile as torch_profile

        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                fn(x)
            torch.cuda.synchronize()
        result["profile"] = top_kernels(prof)
        result["profile"]["runs"] = 3
    return result


def cmd_torch(args):
    """PyTorch eager and torch.compile (default mode, dynamic=False) for each configuration.
    Each model runs in its own child process, so that nothing of an earlier model (its weights
    held by a compiled wrapper, cached allocator blocks) is counted in a later one's memory."""
    models = [m for m in args.models
              if any(c[1] == m and (not args.only or c[0] in args.only) for c in configs())]
    if len(models) > 1:
        merged, deadline = None, time.time() + args.budget_s
        for model in models:
            part = args.out + f".{model}.json"
            command = [sys.executable, os.path.abspath(__file__), "torch", "--out", part,
                       "--models", model, "--runs", str(args.runs),
                       "--budget-s", str(max(30.0, deadline - time.time()))]
            command += (["--log", args.log] if args.log else []) + \
                (["--profile"] if args.profile else []) + \
                (["--only"] + args.only if args.only else [])
            subprocess.run(command)
            if not os.path.exists(part):
                continue
            result = json.load(open(part))
            os.remove(part)
            if merged is None:
                merged = result
            else:
                merged["configs"].update(result["configs"])
        with open(args.out, "w") as handle:
            json.dump(merged or {"configs": {}}, handle, indent=1)
        return 0
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.benchmark = True  # like memopt's per-call-site algorithm search
    torch._dynamo.config.cache_size_limit = 64
    torch._dynamo.config.automatic_dynamic_shapes = False
    say = log_to(args.log) if args.log else print
    results = {"environment": torch_environment(), "settings": {
        "allow_tf32": False, "cudnn_benchmark": True, "compile_mode": "default",
        "dynamic": False, "inference_mode": True, "runs": args.runs}, "configs": {}}
    deadline = time.time() + args.budget_s
    selected = [c for c in configs(args.models) if not args.only or c[0] in args.only]
    by_model = {}
    for name, model, batch in selected:
        by_model.setdefault(model, []).append((name, batch))

    def save():
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=1)

    for model, entries in by_model.items():
        module = build_torch_model(model).cuda()
        weight_bytes = sum(t.numel() * t.element_size()
                           for t in list(module.parameters()) + list(module.buffers()))
        results["resident_after_load_bytes"] = torch.cuda.memory_allocated()
        for name, batch in entries:
            entry = {"model": model, "batch": batch, "weight_bytes": weight_bytes}
            if model in TEXT:
                entry["attn_implementation"] = module.attn_implementation
            _, array = make_input(model, batch)
            x = torch.from_numpy(array).cuda()
            profile = args.profile and batch > 1
            for mode in ("eager", "compile"):
                if time.time() > deadline:
                    entry[mode] = {"error": "time budget spent"}
                    continue
                try:
                    with torch.inference_mode():
                        fn = module
                        if mode == "compile":
                            torch._dynamo.reset()
                            fn = torch.compile(module, dynamic=False)
                        begin = time.time()
                        fn(x)
                        torch.cuda.synchronize()
                        first_s = time.time() - begin
                        entry[mode] = torch_measure(fn, x, weight_bytes, args.runs, profile)
                        entry[mode]["first_call_s"] = first_s
                    say(f"torch {name} {mode}: {entry[mode]['median_ms']:.3f} ms, beyond weights "
                        f"{entry[mode]['peak_beyond_weights_bytes'] / 2**20:.1f} MiB, "
                        f"first call {first_s:.1f} s")
                except Exception as error:  # noqa: BLE001 - recorded per configuration
                    entry[mode] = {"error": f"{type(error).__name__}: {str(error)[:1500]}"}
                    say(f"torch {name} {mode}: FAILED {entry[mode]['error'][:300]}")
                torch._dynamo.reset()
                torch.cuda.empty_cache()
            results["configs"][name] = entry
            del x
            save()
        del module
        torch.cuda.empty_cache()
    save()
    return 0


# ----------------------------------------------------------------------------------------------
# memopt side: prepare (here)


def copy_source_tree(dest):
    """The runtime's sources (lib/Runtime, include, unittests/Runtime, test/GPU inputs,
    scripts, this bench and python/models), for the standalone build on the device."""
    src = os.path.join(dest, "src")
    shutil.rmtree(src, ignore_errors=True)
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    keep = ("lib/Runtime/", "include/memopt/Runtime/", "unittests/Runtime/", "test/GPU/",
            "scripts/", "bench/", "python/models/")
    for path in files:
        if path.startswith(keep) and os.path.exists(os.path.join(REPO, path)):
            target = os.path.join(src, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(os.path.join(REPO, path), target)
    # cudnn-frontend's headers (the pinned wheel scripts/setup.sh installs here): the GPU
    # machine has cuDNN but not this wheel, and lib/Runtime/CMakeLists.txt looks for a copy in
    # src/third_party/ before building WITHOUT cuDNN's fused attention (memopt's kernels only:
    # an issue 26 inference run measured every attention on them that way).
    frontend = cudnn_frontend_include()
    if frontend is None:
        raise RuntimeError("cudnn-frontend's headers are not installed here "
                           "(scripts/setup.sh installs nvidia-cudnn-frontend)")
    shutil.copytree(frontend, os.path.join(src, "third_party", "cudnn-frontend", "include"))


def cudnn_frontend_include():
    """The include/ folder of the installed nvidia-cudnn-frontend wheel (as CMake finds it),
    or None."""
    import importlib.metadata
    import pathlib

    try:
        dist = importlib.metadata.distribution("nvidia-cudnn-frontend")
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if str(f).endswith("include/cudnn_frontend.h"):
            return str(pathlib.Path(dist.locate_file(f)).parent)
    return None


def cmd_prepare(args):
    import fill_weights

    dest = os.path.abspath(args.dest)
    os.makedirs(dest, exist_ok=True)
    copy_source_tree(dest)
    if args.src_only:
        print(f"copied the source tree to {dest}/src")
        return 0
    programs = os.path.join(dest, "programs")
    shutil.rmtree(programs, ignore_errors=True)
    os.makedirs(programs)
    compile_bin = os.path.join(os.path.abspath(args.build), "bin", "memopt-compile")
    scratch = tempfile.mkdtemp(prefix="gpu_bench_prepare_")
    with tarfile.open(args.graphs) as tar:
        tar.extractall(os.path.join(scratch, "graphs"))
    summary = {}
    for name, model, batch in configs():
        graph = os.path.join(scratch, "graphs", f"{name}.onnx")
        if args.only and name not in args.only:
            continue
        if not os.path.exists(graph):
            summary[name] = {"error": "graph not exported"}
            print(f"{name}: no graph")
            continue
        filled_dir = os.path.join(scratch, "filled", name)
        os.makedirs(filled_dir, exist_ok=True)
        fill_weights.fill(graph, filled_dir, log=open(os.devnull, "w"))
        out = os.path.join(scratch, "out", name)
        os.makedirs(out, exist_ok=True)
        command = [compile_bin, os.path.join(filled_dir, f"{name}.onnx"), "-o",
                   os.path.join(out, name), "--target", "cuda", "--emit", "source",
                   "--arch", "sm_90", "--report", os.path.join(out, "report.json")]
        command += args.extra
        begin = time.time()
        proc = subprocess.run(command, capture_output=True, text=True)
        seconds = time.time() - begin
        if proc.returncode != 0:
            message = (proc.stderr or proc.stdout).strip()
            summary[name] = {"error": message[-2000:], "command": " ".join(command[1:])}
            print(f"{name}: memopt-compile FAILED ({seconds:.1f} s)\n{message[-2000:]}")
        else:
            shutil.copy(os.path.join(out, f"{name}.cu"), programs)
            report = json.load(open(os.path.join(out, "report.json")))
            summary[name] = {"compile_s": seconds, "report": report,
                             "source_bytes": os.path.getsize(os.path.join(out, f"{name}.cu")),
                             "command": "memopt-compile GRAPH.onnx " + " ".join(command[3:])}
            print(f"{name}: ok in {seconds:.1f} s, source "
                  f"{summary[name]['source_bytes'] / 2**20:.2f} MiB")
        shutil.rmtree(filled_dir, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)
    with open(os.path.join(dest, "prepare.json"), "w") as handle:
        json.dump(summary, handle, indent=1)
    return 0 if any("error" not in s for s in summary.values()) else 1


# ----------------------------------------------------------------------------------------------
# memopt side: device


MEMORY_FIELDS = ("arena_bytes", "weight_bytes", "io_bytes", "workspace_bytes",
                 "device_peak_used_bytes", "device_total_bytes")


def parse_bench(text):
    """The executable's `bench:` and `memory:` lines as numbers."""
    result = {}
    bench = re.search(r"bench: backend=(\S+) runs=(\d+) median_ms=(\S+) min_ms=(\S+) "
                      r"max_ms=(\S+)", text)
    if bench:
        result.update(backend=bench.group(1), runs=int(bench.group(2)),
                      median_ms=float(bench.group(3)), min_ms=float(bench.group(4)),
                      max_ms=float(bench.group(5)))
    memory = re.search(r"memory: (.*)", text)
    if memory:
        for key, value in re.findall(r"(\w+)=(\d+)", memory.group(1)):
            result[key] = int(value)
    if "arena_bytes" in result:
        # Everything the executable allocates besides the weight region.
        result["beyond_weights_bytes"] = (result["arena_bytes"] + result["io_bytes"] +
                                          result["workspace_bytes"])
    return result


def compare_outputs(cuda_file, host_file):
    import numpy as np

    a = np.load(cuda_file).astype(np.float64)
    b = np.load(host_file).astype(np.float64)
    if a.shape != b.shape:
        return {"error": f"shape {a.shape} vs {b.shape}"}
    diff = float(np.linalg.norm(a - b))
    return {"rel_l2": diff / max(float(np.linalg.norm(b)), 1e-30),
            "max_abs": float(np.max(np.abs(a - b))), "ref_max_abs": float(np.max(np.abs(b))),
            "finite": bool(np.isfinite(a).all() and np.isfinite(b).all())}


def run_parallel(jobs, limit, deadline, on_done, say, env=None):
    """Runs (key, command) pairs, `limit` at a time, until `deadline` (time.time()); calls
    on_done(key, returncode, output, seconds), with returncode None for a job killed at the
    deadline or never started. `env`: the children's environment (default: ours)."""
    # Each child writes to its own temporary file, read when it ends: a pipe read only at the
    # end blocks a child whose output passes the pipe's 64 KiB (nvcc's warnings on a large
    # generated program did, and the fit suite's first device builds never finished).
    pending, running = list(jobs), []
    while pending or running:
        while pending and len(running) < limit and time.time() < deadline:
            key, command = pending.pop(0)
            log = tempfile.TemporaryFile(mode="w+")
            running.append((key, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                  text=True, env=env),
                            time.time(), log))
        if not running:
            break
        time.sleep(0.2)
        for item in list(running):
            key, proc, started, log = item
            if proc.poll() is None and time.time() < deadline:
                continue
            if proc.poll() is None:
                proc.kill()
                proc.wait()
                running.remove(item)
                log.close()
                on_done(key, None, "killed at the deadline", time.time() - started)
                continue
            running.remove(item)
            log.seek(0)
            output = log.read()
            log.close()
            on_done(key, proc.returncode, output, time.time() - started)
    for key, _ in pending:
        on_done(key, None, "not started before the deadline", 0.0)


class HeldProcesses:
    """Processes that prepare (compile) beside other work, say so and wait, and do their
    measured part only when released one at a time: the GPU is someone else's meanwhile.
    One process per key: `command(key, out, hold)` is its command line, with `out` its result
    file (WORK/KEY.json) and `hold` the prefix of its two signal files (it creates HOLD.ready
    when prepared, then waits for HOLD.go). At most `limit` prepare at a time; those still
    preparing `cap` seconds after the start are stopped. (PyTorch's `torch-one --hold` of
    gpu_bench_precision.py and train_bench.py speak this protocol.)"""

    def __init__(self, keys, command, work, say, limit, cap, env=None):
        import threading

        self.keys, self.say, self.work, self.env = list(keys), say, work, env
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.procs, self.logs = {}, {}
        self.commands = {k: command(k, self.path(k, ".json"), self.path(k, "")) for k in keys}
        self.thread = threading.Thread(target=self._launch, args=(limit, cap))
        self.thread.start()

    def path(self, key, suffix):
        return os.path.join(self.work, key + suffix)

    def ready(self, key):
        return os.path.exists(self.path(key, ".ready"))

    def _launch(self, limit, cap):
        pending, preparing, begin = list(self.keys), [], time.time()
        while pending or preparing:
            for key in list(preparing):
                if self.ready(key) or self.procs[key].poll() is not None:
                    preparing.remove(key)
                    self.say(f"{key}: " + ("ready" if self.ready(key) else
                             f"exited {self.procs[key].returncode}") +
                             f" ({time.time() - begin:.0f} s)")
            if time.time() > begin + cap:
                for key in preparing:
                    self.procs[key].kill()
                    self.say(f"{key}: still compiling at the cap ({cap:.0f} s), stopped")
                for key in pending:
                    self.say(f"{key}: not started before the cap ({cap:.0f} s)")
                break
            while pending and len(preparing) < limit:
                key = pending.pop(0)
                self.logs[key] = open(self.path(key, ".log"), "w")
                self.procs[key] = subprocess.Popen(
                    self.commands[key], stdout=self.logs[key], stderr=subprocess.STDOUT,
                    env=self.env)
                preparing.append(key)
            time.sleep(0.5)

    def join_compiles(self):
        self.thread.join()

    def release(self, key, stop):
        """Lets `key`'s process do its measured part and waits for it until `stop`
        (time.time()); stops it if it is not ready or time is up."""
        proc = self.procs.get(key)
        if proc is not None and proc.poll() is None and time.time() > stop:
            proc.kill()
            self.say(f"{key}: not measured before the deadline")
        elif proc is not None and self.ready(key) and proc.poll() is None:
            open(self.path(key, ".go"), "w").close()
            try:
                proc.wait(timeout=max(1.0, stop - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
                self.say(f"{key}: killed at the deadline")
        elif proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.wait()
        if key in self.logs:
            self.logs[key].close()


def cmd_device(args):
    """Runs from the carry folder (cwd): src/, programs/, optionally inductor.tar.gz.

    Phase A (CPU only, GPU idle): the runtime through scripts/gpu_check.sh (CUDA build, kernel
    suite and example program on both backends), a host-only runtime build, two objects per
    generated program (one source, OUT.cu: g++ for the host, nvcc for CUDA with its generated
    fused kernels), the host executables and
    their runs (batch 1 first), until --host-cap-s. Phase B: the CUDA executables' --bench runs,
    one at a time. Phase C: the PyTorch baselines (child processes). Then the comparisons."""
    import numpy as np

    begin_all = time.time()
    root = os.getcwd()
    src = os.path.join(root, "src")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    say = log_to(os.path.join(out, "device_log.txt"))
    work = args.work
    os.makedirs(work, exist_ok=True)
    results = {"configs": {}, "phases": {}, "settings": {"runs": args.runs, "seed": SEED}}
    result_path = os.path.join(out, "device.json")

    def save():
        with open(result_path, "w") as handle:
            json.dump(results, handle, indent=1)

    def phase(name):
        results["phases"][name] = round(time.time() - begin_all, 1)
        save()

    names = [c for c in configs() if os.path.exists(os.path.join(root, "programs",
                                                                 f"{c[0]}.cu"))]
    if args.only:
        names = [c for c in names if c[0] in args.only]
    for name, model, batch in names:
        results["configs"][name] = {"model": model, "batch": batch}
    say(f"programs: {', '.join(n for n, _, _ in names)}")
    include = os.path.join(src, "include")

    # A1. The CUDA runtime + GPU checks in the background; the host runtime and the objects.
    rt, rt_host = os.path.join(work, "rt"), os.path.join(work, "rt-host")
    env = dict(os.environ, JOBS=str(args.jobs), CUDA_ARCH="90", SKIP_PERF="1")
    check_log = open(os.path.join(out, "gpu_check_log.txt"), "w")
    check = subprocess.Popen(["bash", os.path.join(src, "scripts", "gpu_check.sh"), rt],
                             stdout=check_log, stderr=subprocess.STDOUT, env=env)
    host_build = subprocess.run(
        f"cmake -S {src}/lib/Runtime -B {rt_host} -G Ninja -DCMAKE_BUILD_TYPE=Release "
        f"-DMEMOPT_ENABLE_CUDA=OFF >/dev/null && cmake --build {rt_host} -j 4 --target "
        "memopt_runtime_main memopt_runtime_host", shell=True, capture_output=True, text=True)
    if host_build.returncode != 0:
        say("host runtime build FAILED\n" + (host_build.stdout + host_build.stderr)[-2000:])
    # One object per backend from the same source: g++ for the host (the step interpreter),
    # nvcc for CUDA (the generated fused kernels).
    objects = {n: os.path.join(work, f"{n}.host.o") for n, _, _ in names}
    cuda_objects = {n: os.path.join(work, f"{n}.cuda.o") for n, _, _ in names}

    def object_done(key, code, text, seconds):
        name, backend = key
        if code != 0:
            results["configs"][name]["build_error"] = f"{backend} object: {text[-2000:]}"
            say(f"{name}: {backend} object FAILED\n{text[-2000:]}")

    source = lambda n: os.path.join(root, "programs", f"{n}.cu")  # noqa: E731
    run_parallel([((n, "host"), ["g++", "-std=c++17", "-O1", "-x", "c++", "-c", source(n),
                                 f"-I{include}", "-o", objects[n]]) for n, _, _ in names] +
                 [((n, "cuda"), ["nvcc", "-std=c++17", "-O1", "-arch=sm_90", "-c", source(n),
                                 f"-I{include}", "-o", cuda_objects[n]]) for n, _, _ in names],
                 args.jobs, begin_all + 600, object_done, say)
    phase("objects_done_s")
    hlib = lambda n: os.path.join(rt_host, f"libmemopt_runtime_{n}.a")  # noqa: E731
    ok = [c for c in names if "build_error" not in results["configs"][c[0]]]

    def link_done(name, code, text, seconds):
        if code != 0:
            results["configs"][name[0]]["build_error"] = f"{name[1]} link: {text[-2000:]}"
            say(f"{name[0]}: {name[1]} link FAILED\n{text[-2000:]}")

    run_parallel([((n, "host"), ["g++", objects[n], hlib("main"), hlib("driver"), hlib("host"),
                                 hlib("common"), "-lpthread", "-o",
                                 os.path.join(work, f"{n}.host")]) for n, _, _ in ok],
                 args.jobs, begin_all + 600, link_done, say)

    # A2. Inputs, and the host executables (batch 1 first) until the cap.
    for name, model, batch in names:
        np.save(os.path.join(work, f"{name}.input.npy"), make_input(model, batch)[1])

    def host_command(name, model, batch):
        out_dir = os.path.join(work, "outputs", name, "host")
        os.makedirs(out_dir, exist_ok=True)
        return [os.path.join(work, f"{name}.host"), "--random-weights", str(SEED), "--input",
                f"{input_spec(model, batch)[0]}={os.path.join(work, name + '.input.npy')}",
                "--output-dir", out_dir]

    def host_done(name, code, text, seconds):
        entry = results["configs"][name]
        if code is None:
            entry["host_check"] = {"error": f"host run {text} ({seconds:.0f} s)"}
        elif code != 0:
            entry["host_check"] = {"error": f"host run failed: {text[-1500:]}"}
        else:
            entry["host_check"] = {"host_s": round(seconds, 1)}
        say(f"{name}: host run {'ok' if code == 0 else 'not done'} ({seconds:.0f} s)")

    host_jobs = [(n, host_command(n, m, b)) for n, m, b in sorted(ok, key=lambda c: c[2])
                 if "build_error" not in results["configs"][n] and
                 (b == 1 or n in args.host_realistic)]
    # The host backend runs large ops on worker threads: share the cores between the jobs.
    threads = max(1, (os.cpu_count() or 1) // max(1, args.host_jobs))
    say(f"host runs: {args.host_jobs} at a time, {threads} threads each")
    run_parallel(host_jobs, args.host_jobs, begin_all + args.host_cap_s, host_done, say,
                 env=dict(os.environ, MEMOPT_HOST_THREADS=str(threads)))
    phase("host_runs_done_s")

    check.wait()
    check_log.close()
    check_text = open(os.path.join(out, "gpu_check_log.txt")).read()
    results["gpu_check"] = {"exit": check.returncode,
                            "passed": "GPU CHECK PASSED" in check_text,
                            "tail": check_text[-1500:]}
    say(f"gpu_check.sh: exit {check.returncode}")
    phase("gpu_check_done_s")

    # A3. CUDA executables (cuDNN from the wheel through gpu_check.sh's link folder).
    _, cudnn_lib = cudnn_paths()
    lib = lambda n: os.path.join(rt, f"libmemopt_runtime_{n}.a")  # noqa: E731
    link_dir = os.path.join(rt, "cudnn-lib")
    run_parallel([((n, "cuda"), ["nvcc", "-arch=sm_90"] +
                   ([f"-L{link_dir}"] if os.path.isdir(link_dir) else []) +
                   [cuda_objects[n], lib("main"), lib("driver"), lib("cuda"), lib("common"),
                    "-lcublasLt", "-lcudnn", "-o", os.path.join(work, f"{n}.cuda")])
                  for n, _, _ in ok], args.jobs, begin_all + 600, link_done, say)
    if cudnn_lib:
        os.environ["LD_LIBRARY_PATH"] = cudnn_lib + ":" + os.environ.get("LD_LIBRARY_PATH", "")
    phase("build_done_s")
    if args.pack:
        # Static runtime libraries and objects, for a later call that only relinks.
        with tarfile.open(os.path.join(out, "built.tar.gz"), "w:gz") as tar:
            for n in ("main", "driver", "cuda", "common"):
                tar.add(lib(n), arcname=f"rt/libmemopt_runtime_{n}.a")
            for n, _, _ in ok:
                tar.add(objects[n], arcname=f"obj/{n}.host.o")
                tar.add(cuda_objects[n], arcname=f"obj/{n}.cuda.o")

    # B. The CUDA runs, one at a time, nothing else on the machine.
    for name, model, batch in names:
        entry = results["configs"][name]
        if "build_error" in entry:
            continue
        out_dir = os.path.join(work, "outputs", name, "cuda")
        os.makedirs(out_dir, exist_ok=True)
        command = [os.path.join(work, f"{name}.cuda"), "--random-weights", str(SEED),
                   "--input",
                   f"{input_spec(model, batch)[0]}={os.path.join(work, name + '.input.npy')}",
                   "--output-dir", out_dir, "--bench", str(args.runs)]
        started = time.time()
        proc = subprocess.run(command, capture_output=True, text=True)
        entry["cuda_wall_s"] = round(time.time() - started, 2)
        if proc.returncode != 0:
            entry["cuda_error"] = (proc.stderr + proc.stdout)[-2000:]
            say(f"{name}: cuda run FAILED: {entry['cuda_error'][-500:]}")
            continue
        entry["memopt"] = m = parse_bench(proc.stdout)
        say(f"memopt {name}: {m.get('median_ms', float('nan')):.3f} ms, beyond weights "
            f"{m.get('beyond_weights_bytes', 0) / 2**20:.1f} MiB (arena "
            f"{m.get('arena_bytes', 0) / 2**20:.1f}, io {m.get('io_bytes', 0) / 2**20:.1f}, "
            f"workspace {m.get('workspace_bytes', 0) / 2**20:.1f}), device peak "
            f"{m.get('device_peak_used_bytes', 0) / 2**20:.0f} MiB")
        check_entry = entry.get("host_check", {})
        if "host_s" in check_entry:
            file = output_name(model) + ".npy"
            check_entry.update(compare_outputs(os.path.join(out_dir, file),
                                               os.path.join(work, "outputs", name, "host",
                                                            file)))
            say(f"{name}: CUDA vs host rel L2 {check_entry.get('rel_l2', float('nan')):.2e}")
        # Attention: the run above takes the chunked library path wherever its workspace
        # allows; the same program with --fused-attention runs the fused kernel everywhere.
        # Two independent CUDA implementations on the whole model at the real batch, where
        # the host backend is too slow to finish.
        if "attention(ctx" in open(os.path.join(root, "programs", f"{name}.cu")).read():
            fused_dir = os.path.join(work, "outputs", name, "cuda_fused")
            os.makedirs(fused_dir, exist_ok=True)
            fused = subprocess.run(command[:command.index("--output-dir")] +
                                   ["--output-dir", fused_dir, "--fused-attention"],
                                   capture_output=True, text=True)
            file = output_name(model) + ".npy"
            entry["attention_check"] = (
                compare_outputs(os.path.join(out_dir, file), os.path.join(fused_dir, file))
                if fused.returncode == 0 else
                {"error": (fused.stderr + fused.stdout)[-1000:]})
            say(f"{name}: chunked vs fused attention rel L2 "
                f"{entry['attention_check'].get('rel_l2', float('nan')):.2e}")
        save()
    phase("memopt_runs_done_s")

    # C. PyTorch eager and torch.compile on the same GPU (one child process per model).
    if not args.skip_torch:
        cache = os.path.join(root, "inductor.tar.gz")
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR="/tmp/ind")
        if os.path.exists(cache):
            with tarfile.open(cache) as tar:
                tar.extractall("/tmp")
        budget = max(60.0, args.deadline_s - (time.time() - begin_all))
        command = [sys.executable, os.path.abspath(__file__), "torch", "--out",
                   os.path.join(out, "torch.json"), "--log", os.path.join(out, "device_log.txt"),
                   "--runs", str(args.runs), "--budget-s", str(budget)]
        command += (["--profile"] if args.profile else []) + \
            (["--only"] + args.only if args.only else [])
        subprocess.run(command, env=env)
    phase("total_s")
    say(f"device step done in {time.time() - begin_all:.0f} s")
    return 0


def ncu_kernels(command, ncu, log_path, timeout_s=120):
    """Per-kernel device time of one eager run of a memopt executable under Nsight Compute
    (gpu__time_duration.sum, caches and clocks left alone), summed by kernel name."""
    import csv

    full = [ncu, "--metrics", "gpu__time_duration.sum", "--csv", "--print-units", "base",
            "--cache-control", "none", "--clock-control", "none", "--log-file", log_path] + command
    try:
        proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout_s)
    except OSError as error:
        return {"error": f"cannot run {ncu}: {error}"}
    except subprocess.TimeoutExpired:
        # Seen with MobileNetV3 at batch 32: cuDNN's algorithm search launches thousands of
        # kernels, each profiled.
        return {"error": f"ncu did not finish in {timeout_s} s"}
    rows = list(csv.reader(open(log_path))) if os.path.exists(log_path) else []
    header = next((i for i, row in enumerate(rows) if row[:1] == ["ID"]), None)
    if header is None:
        return {"error": (proc.stderr + proc.stdout)[-1500:]}
    columns = rows[header]
    name_col, value_col = columns.index("Kernel Name"), columns.index("Metric Value")
    by_name, total, count = {}, 0.0, 0
    for row in rows[header + 1:]:
        if len(row) <= value_col:
            continue
        ns = float(row[value_col].replace(",", ""))
        name = re.sub(r"\(.*", "", row[name_col])[:120]
        calls, sum_ns = by_name.get(name, (0, 0.0))
        by_name[name] = (calls + 1, sum_ns + ns)
        total += ns
        count += 1
    top = sorted(by_name.items(), key=lambda kv: -kv[1][1])
    return {"kernels": count, "total_ms": total / 1e6,
            "top": [{"name": n, "calls": c, "ms": t / 1e6} for n, (c, t) in top[:12]]}


def cmd_extra(args):
    """Second device call: relinks from OUT/built.tar.gz of `device --pack`, profiles memopt's
    eager run of --profile configurations with Nsight Compute, and runs the host checks that
    the first call had no time for (--host), comparing with fresh CUDA outputs."""
    import numpy as np

    begin_all = time.time()
    root = os.getcwd()
    src = os.path.join(root, "src")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    say = log_to(os.path.join(out, "extra_log.txt"))
    work = args.work
    os.makedirs(work, exist_ok=True)
    with tarfile.open(os.path.join(root, "built.tar.gz")) as tar:
        tar.extractall(work)
    results = {"profiles": {}, "host_checks": {}}
    result_path = os.path.join(out, "extra.json")

    def save():
        with open(result_path, "w") as handle:
            json.dump(results, handle, indent=1)

    table = {c[0]: c for c in configs()}
    wanted = sorted(set(args.profile) | set(args.host))
    rt_host = os.path.join(work, "rt-host")
    subprocess.run(f"cmake -S {src}/lib/Runtime -B {rt_host} -G Ninja -DCMAKE_BUILD_TYPE=Release "
                   f"-DMEMOPT_ENABLE_CUDA=OFF >/dev/null && cmake --build {rt_host} -j 16 "
                   "--target memopt_runtime_main memopt_runtime_host >/dev/null", shell=True)
    _, cudnn_lib = cudnn_paths()
    link_dir = os.path.join(work, "cudnn-lib")
    os.makedirs(link_dir, exist_ok=True)
    if cudnn_lib:
        found = sorted(f for f in os.listdir(cudnn_lib) if f.startswith("libcudnn.so"))
        if found and not os.path.exists(os.path.join(link_dir, "libcudnn.so")):
            os.symlink(os.path.join(cudnn_lib, found[0]), os.path.join(link_dir, "libcudnn.so"))
        os.environ["LD_LIBRARY_PATH"] = cudnn_lib + ":" + os.environ.get("LD_LIBRARY_PATH", "")
    lib = lambda d, n: os.path.join(work, d, f"libmemopt_runtime_{n}.a")  # noqa: E731

    def link_done(key, code, text, seconds):
        if code != 0:
            say(f"{key}: link FAILED {text[-1500:]}")

    jobs = []
    for name in wanted:
        obj = os.path.join(work, "obj", f"{name}.host.o")
        jobs.append(((name, "cuda"), ["nvcc", "-arch=sm_90", f"-L{link_dir}",
                                      os.path.join(work, "obj", f"{name}.cuda.o"),
                                      lib("rt", "main"), lib("rt", "driver"), lib("rt", "cuda"),
                                      lib("rt", "common"), "-lcublasLt", "-lcudnn", "-o",
                                      os.path.join(work, f"{name}.cuda")]))
        if name in args.host:
            jobs.append(((name, "host"), ["g++", obj, lib("rt-host", "main"),
                                          lib("rt-host", "driver"), lib("rt-host", "host"),
                                          lib("rt-host", "common"), "-lpthread", "-o",
                                          os.path.join(work, f"{name}.host")]))
    run_parallel(jobs, 16, begin_all + 300, link_done, say)
    results["link_s"] = time.time() - begin_all

    def io_args(name, kind):
        _, model, batch = table[name]
        input_file = os.path.join(work, f"{name}.input.npy")
        if not os.path.exists(input_file):
            np.save(input_file, make_input(model, batch)[1])
        out_dir = os.path.join(work, "outputs", name, kind)
        os.makedirs(out_dir, exist_ok=True)
        return ["--random-weights", str(SEED), "--input",
                f"{input_spec(model, batch)[0]}={input_file}", "--output-dir", out_dir]

    # Host runs in the background (CPU) while the GPU profiles run.
    host_procs = {}
    for name in args.host:
        host_procs[name] = (subprocess.Popen(
            [os.path.join(work, f"{name}.host")] + io_args(name, "host"),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), time.time())
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    for name in args.profile:
        started = time.time()
        results["profiles"][name] = profile = ncu_kernels(
            [os.path.join(work, f"{name}.cuda")] + io_args(name, "ncu"), ncu,
            os.path.join(work, f"{name}.ncu.csv"))
        profile["seconds"] = time.time() - started
        say(f"ncu {name}: {profile.get('kernels')} kernels, "
            f"{profile.get('total_ms', float('nan')):.2f} ms in {profile['seconds']:.0f} s")
        for row in profile.get("top", [])[:6]:
            say(f"    {row['ms']:8.3f} ms  x{row['calls']:<4d} {row['name']}")
        save()
    for name in args.host:
        exe = os.path.join(work, f"{name}.cuda")
        proc = subprocess.run([exe] + io_args(name, "cuda"), capture_output=True,
                              text=True) if os.path.exists(exe) else None
        if proc is None or proc.returncode != 0:
            say(f"{name}: cuda run FAILED {proc.stderr[-500:] if proc else 'no executable'}")
    for name, (proc, started) in host_procs.items():
        remaining = begin_all + args.deadline_s - time.time()
        try:
            proc.wait(timeout=max(1.0, remaining))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            results["host_checks"][name] = {"error": "host run unfinished at the deadline "
                                            f"({time.time() - started:.0f} s)"}
            say(f"{name}: host run unfinished")
            continue
        model = table[name][1]
        file = output_name(model) + ".npy"
        check = compare_outputs(os.path.join(work, "outputs", name, "cuda", file),
                                os.path.join(work, "outputs", name, "host", file))
        check["host_s"] = round(time.time() - started, 1)
        results["host_checks"][name] = check
        say(f"{name}: CUDA vs host rel L2 {check.get('rel_l2', float('nan')):.2e} "
            f"(host {check['host_s']} s)")
        save()
    save()
    return 0


# ----------------------------------------------------------------------------------------------
# report (here)


def mib(n):
    return f"{n / 2**20:.1f}"


def cmd_report(args):
    device = json.load(open(args.device_json))
    torch_res = json.load(open(args.torch_json))
    prepare = json.load(open(args.prepare_json)) if args.prepare_json else {}
    notes = open(args.notes).read() if args.notes else ""
    profiles = {}
    for path in args.extra_json or []:
        extra = json.load(open(path))
        profiles.update({k: v for k, v in extra.get("profiles", {}).items() if "top" in v})
        for name, check in extra.get("host_checks", {}).items():
            entry = device["configs"].setdefault(name, {})
            if "rel_l2" in check or "rel_l2" not in (entry.get("host_check") or {}):
                entry["host_check"] = check
    env = torch_res.get("environment", {})
    rows, merged = [], {}
    for name, model, batch in configs():
        d = device["configs"].get(name, {})
        t = torch_res["configs"].get(name, {})
        m = d.get("memopt", {})
        eager, comp = t.get("eager", {}), t.get("compile", {})
        record = {"model": model, "batch": batch, "memopt": m, "eager": eager,
                  "compile": comp, "host_check": d.get("host_check"),
                  "attention_check": d.get("attention_check"),
                  "weight_bytes_torch": t.get("weight_bytes"),
                  "prepare": {k: v for k, v in prepare.get(name, {}).items() if k != "report"}}
        for key in ("build_error", "cuda_error"):
            if key in d:
                record[key] = d[key]
        if name in profiles:
            record["memopt_ncu_profile"] = profiles[name]
        merged[name] = record
        shape = "x".join(map(str, input_spec(model, batch)[1]))

        def lat(r):
            return f"{r['median_ms']:.3f}" if "median_ms" in r else "—"

        def mem(r, key):
            return mib(r[key]) if key in r else "—"

        ratio = (f"{m['median_ms'] / comp['median_ms']:.2f}"
                 if "median_ms" in m and "median_ms" in comp else "—")
        check = d.get("host_check") or {}
        check_text = (f"{check['rel_l2']:.1e}" if "rel_l2" in check else
                      ("unfinished" if "error" in check else "not run"))
        attention = d.get("attention_check") or {}
        attention_text = (f"{attention['rel_l2']:.1e}" if "rel_l2" in attention else
                          ("failed" if "error" in attention else "—"))
        verdict = "—"
        if "beyond_weights_bytes" in m and "peak_beyond_weights_bytes" in eager and \
                "peak_beyond_weights_bytes" in comp and "median_ms" in comp:
            mem_ok = m["beyond_weights_bytes"] < min(eager["peak_beyond_weights_bytes"],
                                                     comp["peak_beyond_weights_bytes"])
            lat_ok = m["median_ms"] <= 1.25 * comp["median_ms"]
            verdict = ("yes" if mem_ok and lat_ok else
                       "no (" + ", ".join(w for w, ok in (("memory", mem_ok), ("latency", lat_ok))
                                          if not ok) + ")")
            record["meets_goal"] = mem_ok and lat_ok
        rows.append(f"| {model} | {shape} | {mem(m, 'beyond_weights_bytes')} | "
                    f"{mem(eager, 'peak_beyond_weights_bytes')} | "
                    f"{mem(comp, 'peak_beyond_weights_bytes')} | {lat(m)} | {lat(eager)} | "
                    f"{lat(comp)} | {ratio} | {mem(m, 'device_peak_used_bytes')} | "
                    f"{check_text} | {attention_text} | "
                    f"{verdict if batch > 1 else '(batch 1)'} |")
    os.makedirs(os.path.dirname(args.json_out), exist_ok=True)
    with open(args.json_out, "w") as handle:
        json.dump({"environment": env, "torch_settings": torch_res.get("settings"),
                   "phases": device.get("phases"), "gpu_check": device.get("gpu_check"),
                   "configs": merged}, handle, indent=1)
    header = ("| model | input | memopt beyond weights | eager beyond weights | "
              "compile beyond weights | memopt ms | eager ms | compile ms | memopt / compile | "
              "memopt device peak | CUDA vs host (rel. L2) | chunked vs fused attention "
              "(rel. L2) | goal met |\n"
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
              "| --- |")
    sections = []
    for name, profile in profiles.items():
        record = merged[name]
        lines = [f"### {name}: memopt {record['memopt'].get('median_ms', 0):.2f} ms, "
                 f"torch.compile {record['compile'].get('median_ms', 0):.2f} ms",
                 "",
                 f"memopt, one eager run under Nsight Compute ({profile['kernels']} kernels, "
                 f"{profile['total_ms']:.2f} ms of kernel time):",
                 "", "| kernel | calls | ms |", "| --- | ---: | ---: |"]
        lines += [f"| `{k['name']}` | {k['calls']} | {k['ms']:.2f} |" for k in profile["top"][:8]]
        torch_profile = record["compile"].get("profile")
        if torch_profile:
            runs = torch_profile.get("runs", 3)
            lines += ["", f"torch.compile, torch.profiler over {runs} calls "
                      f"({torch_profile['total_us'] / runs / 1000:.2f} ms of kernel time per "
                      "call):", "", "| kernel | calls per run | ms per run |",
                      "| --- | ---: | ---: |"]
            lines += [f"| `{k['name'][:110]}` | {k['calls'] // runs} | {k['us'] / runs / 1000:.2f} |"
                      for k in torch_profile["kernels"][:8]]
        sections.append("\n".join(lines))
    text = open(args.template).read()
    text = text.replace("@PROFILES@", "\n\n".join(sections) if sections else
                        "No realistic batch misses the goal in this run, so none was profiled.")
    text = text.replace("@TABLE@", header + "\n" + "\n".join(rows))
    text = text.replace("@ENV@", ", ".join(f"{k} {v}" for k, v in env.items()))
    text = text.replace("@NOTES@", notes.strip())
    # The issue-12 suite's section (bench/gpu_bench_precision.py report) stays as it is.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpu_bench_precision

    kept = (gpu_bench_precision.section_of(open(args.doc_out).read())
            if os.path.exists(args.doc_out) else None)
    with open(args.doc_out, "w") as handle:
        handle.write(text)
    if kept:
        gpu_bench_precision.write_section(args.doc_out, kept)
    print("\n".join([header] + rows))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("--out", required=True)
    p.add_argument("--models", nargs="*", default=MODELS)
    p.add_argument("--only", nargs="*")
    p.add_argument("--jobs", type=int, default=4)
    p = sub.add_parser("export-one")
    p.add_argument("name")
    p.add_argument("model")
    p.add_argument("batch", type=int)
    p.add_argument("work")
    p = sub.add_parser("torch")
    p.add_argument("--out", required=True)
    p.add_argument("--log")
    p.add_argument("--models", nargs="*", default=MODELS)
    p.add_argument("--only", nargs="*")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--budget-s", type=float, default=480)
    p.add_argument("--profile", action="store_true",
                   help="torch.profiler's top kernels at the realistic batch")
    p = sub.add_parser("prepare")
    p.add_argument("--graphs")
    p.add_argument("--dest", required=True)
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--only", nargs="*")
    p.add_argument("--src-only", action="store_true")
    p.add_argument("extra", nargs="*", help="more memopt-compile flags (after --)")
    p = sub.add_parser("device")
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/gpu_bench")
    p.add_argument("--only", nargs="*")
    p.add_argument("--jobs", type=int, default=16)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--host-jobs", type=int, default=4)
    p.add_argument("--host-realistic", nargs="*",
                   default=[f"{m}_b{BATCHES[family(m)][1]}" for m in MODELS],
                   help="realistic-batch configurations also run on the host backend")
    p.add_argument("--host-cap-s", type=float, default=240,
                   help="host runs still going this long after the start are stopped")
    p.add_argument("--deadline-s", type=float, default=570)
    p.add_argument("--pack", action="store_true",
                   help="write OUT/built.tar.gz (runtime libraries and program objects)")
    p.add_argument("--skip-torch", action="store_true")
    p.add_argument("--profile", action="store_true")
    p = sub.add_parser("extra")
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/gpu_bench_extra")
    p.add_argument("--profile", nargs="*", default=[])
    p.add_argument("--host", nargs="*", default=[])
    p.add_argument("--deadline-s", type=float, default=540)
    p = sub.add_parser("report")
    p.add_argument("--device-json", required=True)
    p.add_argument("--torch-json", required=True)
    p.add_argument("--prepare-json")
    p.add_argument("--notes")
    p.add_argument("--extra-json", nargs="*", help="JSON of `extra` calls (profiles, checks)")
    p.add_argument("--template", default=os.path.join(REPO, "bench", "gpu_bench_template.md"))
    p.add_argument("--doc-out", default=os.path.join(REPO, "docs", "gpu-benchmark.md"))
    p.add_argument("--json-out", default=os.path.join(REPO, ".dev-bench", "gpu", "raw",
                                                           "gpu.json"))
    args = parser.parse_args(argv)
    if args.command == "export-one":
        return export_one(args.name, args.model, args.batch, args.work) or 0
    return {"export": cmd_export, "torch": cmd_torch, "prepare": cmd_prepare,
            "device": cmd_device, "extra": cmd_extra, "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
