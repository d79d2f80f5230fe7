#!/usr/bin/env python3
"""Data-parallel benchmark (issue 29): memopt `--data-parallel N --shard MODE` against PyTorch
DDP and FSDP2 (`fully_shard`, with and without `reshard_after_forward`), per-GPU step time
(median of many steps) and peak device memory on 1 and 2 GPUs, one process per GPU under
torchrun.

The benchmark is data: CONFIGS (model, batch per GPU, precision, optimizer), SHARD_MODES
(memopt's `--shard` values; one the compiler refuses is recorded as such, so `parameters`
enters the table the day it compiles), TORCH_MODES and WORLDS. The models, batches, inputs and
graphs are bench/train_bench's (configs.py: BENCH, build_module, make_batch; export.py);
this file adds the ranks.

  export   (GPU machine: torch)  the graphs with torch.onnx's dynamo exporter (train_bench's
                                 export), packed without their weights into OUT/graphs.tar.xz
  prepare  (here: MLIR)          fills the weights (python/models/fill_weights.py), then
                                 memopt-compile --target cuda --emit source for every config x
                                 world x shard mode; the sources xz-compressed, the runtime's
                                 sources at HEAD and this script into the carry folder
  device   (GPU machine)         builds the runtime (cmake -S lib/Runtime) and every program
                                 with nvcc, runs each under `torchrun --nproc-per-node N
                                 --no-python` (the ranks meet over TCP: MASTER_ADDR and
                                 MEMOPT_RDZV_PORT), then the PyTorch modes under torchrun
                                 (`torch-worker`, every config and mode in one launch per world
                                 size) -> OUT/device.json
  report   (here)                one small JSON under bench/results/ and the table (markdown)

Memory: memopt's is what its program allocates (weight region + arena + inputs/outputs +
workspaces, the executable's `memory:` line), PyTorch's is torch.cuda.max_memory_allocated
over a timed step; neither counts the CUDA context or NCCL's own buffers. Time: each rank's
median step (CUDA events around a whole step: the batch upload from host memory, forward,
backward, collectives, update); the table shows the slowest rank's median. Losses: each rank
prints the loss of every step (memopt: the mean over the ranks, as DDP users log it); the
report checks they are equal on every rank, and compares the modes' first losses.

It is the suite `data_parallel` of bench/suites.toml: `python3 bench/run.py plan --suite
data_parallel` prints the steps (export and run on nvidia-h200-x2, compile and report here),
and `run.py report` records each run under bench/results/data_parallel/.
"""

import argparse
import glob
import json
import lzma
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# bench/ in the checkout, or the carry folder inside the checkout's copy on the GPU machine.
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, os.path.join(REPO, "python", "models"))

from train_bench.configs import (BENCH, CHECKS, OPTIMIZERS, SEED, build_module,  # noqa: E402
                                 input_name, make_batch)

# name: (train_bench graph, precision, optimizer)
CONFIGS = {
    "gpt2_b8.bf16": ("gpt2_b8", "bf16", "adamw"),
    "gpt2_b8.tf32": ("gpt2_b8", "tf32", "adamw"),
    "gpt2_medium_b4.bf16": ("gpt2_medium_b4", "bf16", "adamw"),
    "gpt2_medium_b4.tf32": ("gpt2_medium_b4", "tf32", "adamw"),
    "resnet50_b64.fp16": ("resnet50_b64", "fp16", "sgd"),
}
# A small program that checks the launch (TCP rendezvous, NCCL over two processes) in seconds.
SMOKE = {"tiny_convnet.fp32": ("tiny_convnet", "fp32", "sgd")}
SHARD_MODES = ("none", "optimizer", "gradients", "parameters")
# A mode with this suffix compiles without gradient buckets (`--bucket-mib 0`): every collective
# synchronous where its gradient is complete, to measure what the overlap gains.
SYNC_SUFFIX = "-sync"
# name: fully_shard's reshard_after_forward (None: DDP)
TORCH_MODES = {"ddp": None, "fsdp2": True, "fsdp2-keep": False}
WORLDS = (1, 2)
RUNS = 30  # timed steps per run (after warm-up)
LOW = {"fp16": "float16", "bf16": "bfloat16"}


def graph_spec(graph):
    """(model, batch, size, classes) of a train_bench graph name."""
    return {**BENCH, **CHECKS}[graph]


def program_key(config, world, mode):
    return f"{config}.w{world}.{mode}"


def program_table(configs, worlds, modes):
    """(config, world, mode) of every program: one rank is one program (`--data-parallel 1`
    compiles every mode as `none`)."""
    rows = []
    for config in configs:
        for world in worlds:
            for mode in (modes if world > 1 else ("none",)):
                rows.append((config, world, mode))
    return rows


# ----------------------------------------------------------------------------------------------
# export (GPU machine)


def cmd_export(args):
    """train_bench's exporter, then the graph files alone (fill_weights.py rewrites the
    weights here) into OUT/graphs.tar.xz."""
    work = "/tmp/dp_bench_graphs"
    graphs = sorted({CONFIGS[c][0] for c in CONFIGS})
    code = subprocess.run([sys.executable, os.path.join(REPO, "bench", "train_bench.py"),
                           "export", "--out", work, "--only", *graphs]).returncode
    os.makedirs(args.out, exist_ok=True)
    with tarfile.open(os.path.join(args.out, "graphs.tar.xz"), "w:xz") as tar:
        for path in sorted(glob.glob(os.path.join(work, "*.onnx"))):
            tar.add(path, arcname=os.path.basename(path))
        log = os.path.join(work, "export_log.txt")
        if os.path.exists(log):
            tar.add(log, arcname="export_log.txt")
    return code


# ----------------------------------------------------------------------------------------------
# prepare (here)


def frozen_constants(graph):
    from train_bench.prepare import frozen_constants as frozen

    return frozen(graph)


def compile_command(compile_bin, graph, model, precision, optimizer, world, mode, out):
    command = [compile_bin, graph, "--train", "--loss", "cross-entropy", "--loss-output",
               "output" if model == "tiny_convnet" else "logits", *OPTIMIZERS[optimizer],
               "--target", "cuda", "--arch", "sm_90", "--emit", "source", "-o", out,
               "--report", out + ".report.json", "--precision", precision,
               "--data-parallel", str(world), "--shard", mode.removesuffix(SYNC_SUFFIX)]
    if mode.endswith(SYNC_SUFFIX):  # the collectives in order on the compute stream
        command += ["--bucket-mib", "0"]
    if model in ("resnet50", "tiny_convnet"):
        command.append("--bn-batch-stats")
    frozen = frozen_constants(graph)
    if frozen:
        command += ["--freeze", ",".join(frozen)]
    return command


def runtime_sources(dest):
    """lib/Runtime and include at HEAD (others edit the working tree) into DEST/src: the
    headers the programs include."""
    src = os.path.join(dest, "src")
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    # The standalone runtime build names the kernel suite's and the checks' sources too.
    subprocess.run(f"git archive HEAD lib/Runtime include unittests/Runtime test/GPU | "
                   f"tar -x -C {src}", shell=True, cwd=REPO, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                          text=True).stdout.strip()


def cmd_prepare(args):
    import gpu_bench

    dest = os.path.abspath(args.dest)
    work = os.path.abspath(args.work)
    filled = os.path.join(work, "graphs")
    programs = os.path.join(dest, "programs")
    for folder in (filled, programs):
        os.makedirs(folder, exist_ok=True)
    if args.graphs and args.graphs.endswith(".tar.xz"):
        with tarfile.open(args.graphs) as tar:
            tar.extractall(os.path.join(work, "exported"), filter="data")
        graphs_dir = os.path.join(work, "exported")
    else:
        graphs_dir = args.graphs
    table = {**CONFIGS, **SMOKE}
    configs = args.configs or list(table)
    summary_path = os.path.join(dest, "prepare.json")
    summary = json.load(open(summary_path)) if os.path.exists(summary_path) else {"programs": {}}
    summary["commit"] = runtime_sources(dest)
    summary["settings"] = {"configs": {c: table[c] for c in configs}, "shard_modes": SHARD_MODES,
                           "worlds": args.worlds}
    jobs = []
    for config, world, mode in program_table(configs, args.worlds, args.modes):
        graph_name, precision, optimizer = table[config]
        model = graph_spec(graph_name)[0]
        if model == "tiny_convnet":
            graph = os.path.join(REPO, "models", "tiny_convnet.onnx")
        else:
            graph = os.path.join(filled, graph_name + ".onnx")
            if not os.path.exists(graph):
                subprocess.run([sys.executable, os.path.join(REPO, "python", "models",
                                                             "fill_weights.py"),
                                os.path.join(graphs_dir, graph_name + ".onnx"), filled],
                               check=True, capture_output=True)
        key = program_key(config, world, mode)
        previous = summary["programs"].get(key, {})
        if (not args.force and "report" in previous and
                os.path.exists(os.path.join(programs, key + ".cu.xz"))):
            continue  # compiled by an earlier prepare of the same carry
        out = os.path.join(work, "programs", key)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        jobs.append((key, compile_command(args.compile, graph, model, precision, optimizer,
                                          world, mode, out)))

    def done(key, code, text, seconds):
        out = os.path.join(work, "programs", key)
        entry = {"compile_s": round(seconds, 1)}
        if code != 0:
            entry["error"] = text.strip()[-2000:]
            print(f"{key}: memopt-compile refused ({seconds:.0f} s): {entry['error'][-300:]}")
        else:
            report = json.load(open(out + ".report.json"))
            entry["report"] = {k: report.get(k) for k in
                               ("arena_bytes", "weights_bytes", "training", "data_parallel")}
            source = open(out + ".cu", "rb").read()
            with lzma.open(os.path.join(programs, key + ".cu.xz"), "wb", preset=6) as handle:
                handle.write(source)
            entry["source_bytes"] = len(source)
            print(f"{key}: compiled in {seconds:.0f} s, arena "
                  f"{report['arena_bytes'] / 2**20:.0f} MiB, weights "
                  f"{report['weights_bytes'] / 2**20:.0f} MiB")
        summary["programs"][key] = entry
        with open(summary_path, "w") as handle:
            json.dump(summary, handle, indent=1)

    gpu_bench.run_parallel(jobs, args.jobs, time.time() + 6 * 3600, done, print)
    # The same source twice (ZeRO-1 and ZeRO-2 without accumulation are one program): built
    # once on the device.
    sources = {}
    for key in sorted(summary["programs"]):
        path = os.path.join(programs, key + ".cu.xz")
        if os.path.exists(path) and "error" not in summary["programs"][key]:
            text = lzma.open(path).read()
            if text in sources:
                summary["programs"][key]["same_program_as"] = sources[text]
            else:
                sources[text] = key
    # The runtime libraries the programs link: the CUDA backend and the backend-independent
    # driver (main, driver, common), each from a build of this commit's sources.
    os.makedirs(os.path.join(dest, "rt"), exist_ok=True)
    for name, folder in (("cuda", args.runtime_cuda), ("main", args.runtime),
                         ("driver", args.runtime), ("common", args.runtime)):
        shutil.copy(os.path.join(folder, f"libmemopt_runtime_{name}.a"),
                    os.path.join(dest, "rt"))
    shutil.copy(os.path.abspath(__file__), os.path.join(dest, "data_parallel_bench.py"))
    with open(summary_path, "w") as handle:
        json.dump(summary, handle, indent=1)
    total = sum(os.path.getsize(f) for f in glob.glob(os.path.join(dest, "**"), recursive=True)
                if os.path.isfile(f))
    print(f"carry folder {dest}: {total / 2**20:.1f} MiB")
    return 0


# ----------------------------------------------------------------------------------------------
# device (GPU machine)


def nccl_library():
    """libnccl.so.2 from PyTorch's wheel (bench/device_env.py finds the wheels)."""
    import device_env

    for folder in device_env.wheel_library_dirs(("nvidia.nccl",)):
        found = sorted(glob.glob(os.path.join(folder, "libnccl.so*")))
        if found:
            return found[0]
    return None


def build_programs(carry, work, keys, summary, say, deadline=None):
    """Every program: nvcc -c on the device, linked with the carry's runtime libraries (built
    on the development machine, which has cuDNN's and cudnn-frontend's headers) against
    cuBLASLt and cuDNN from PyTorch's wheels. Returns ({key: executable}, {key: error})."""
    import gpu_bench
    from train_bench.device import library_path

    src = os.path.join(carry, "src")
    rt = os.path.join(carry, "rt")
    if not os.path.isdir(rt) and os.path.exists(rt + ".tar.xz"):
        # The runtime libraries compressed (34 MB -> 4.5 MB of the 64 MiB a call carries).
        rt = os.path.join(work, "rt")
        if not os.path.isdir(rt):
            with tarfile.open(os.path.join(carry, "rt.tar.xz")) as tar:
                tar.extractall(work, filter="data")
    link_dir = os.path.join(work, "link")
    os.makedirs(link_dir, exist_ok=True)
    for path in library_path().split(":"):
        for name in ("libcudnn.so", "libcublasLt.so"):
            found = sorted(glob.glob(os.path.join(path, name + "*")))
            if found and not os.path.exists(os.path.join(link_dir, name)):
                os.symlink(found[0], os.path.join(link_dir, name))
    lib = lambda n: os.path.join(rt, f"libmemopt_runtime_{n}.a")  # noqa: E731
    jobs, exes = [], {}
    for key in keys:
        entry = summary["programs"].get(key, {})
        if "error" in entry:
            continue
        base = entry.get("same_program_as", key)
        exe = os.path.join(work, "bin", base)
        exes[key] = exe
        if base != key or any(j[0] == base for j in jobs):
            continue
        os.makedirs(os.path.dirname(exe), exist_ok=True)
        link = (f"nvcc -arch=sm_90 {exe}.o {lib('main')} {lib('driver')} {lib('cuda')} "
                f"{lib('common')} -L{link_dir} -lcublasLt -lcudnn -o {exe}")
        packed = os.path.join(carry, "obj", base + ".o.xz")
        if os.path.exists(packed):
            # Compiled on the development machine (nvcc takes minutes on a large generated
            # program): only linked here.
            with lzma.open(packed) as source, open(exe + ".o", "wb") as target:
                shutil.copyfileobj(source, target)
            jobs.append((base, ["sh", "-c", link]))
            continue
        cu = os.path.join(work, "src", base + ".cu")
        os.makedirs(os.path.dirname(cu), exist_ok=True)
        with open(cu, "wb") as handle:
            handle.write(lzma.open(os.path.join(carry, "programs", base + ".cu.xz")).read())
        jobs.append((base, ["sh", "-c",
                            f"nvcc -std=c++17 -O1 -arch=sm_90 -c {cu} -I{src}/include -o "
                            f"{exe}.o && {link}"]))
    failed = {}

    def done(key, code, text, seconds):
        if code != 0:
            failed[key] = (text or "")[-2000:]
            say(f"build {key}: FAILED\n{(text or '')[-1500:]}")

    begin = time.time()
    gpu_bench.run_parallel(jobs, os.cpu_count() or 8,
                           deadline if deadline else time.time() + 900, done, say)
    say(f"{len(jobs)} programs built in {time.time() - begin:.0f} s, {len(failed)} failed")
    return {k: v for k, v in exes.items() if os.path.exists(v)}, failed


def launch_environment(work):
    from train_bench.device import library_path

    env = dict(os.environ)
    env["NCCL_NVLS_ENABLE"] = "0"  # KINDS.md: NVLink multicast stays off
    env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
    env["NVSHMEM_DISABLE_NVLS"] = "1"
    nccl = nccl_library()
    if nccl:
        env["MEMOPT_NCCL_LIBRARY"] = nccl
    env["LD_LIBRARY_PATH"] = library_path() + ":" + env.get("LD_LIBRARY_PATH", "")
    env.pop("MEMOPT_NCCL_ID_FILE", None)  # the ranks meet over TCP
    return env


def rank_logs(log_dir):
    """{rank: stdout + stderr} from torchrun's --log-dir with --redirects 3."""
    texts = {}
    for path in glob.glob(os.path.join(log_dir, "**", "stdout.log"), recursive=True):
        rank = int(os.path.basename(os.path.dirname(path)))
        err = os.path.join(os.path.dirname(path), "stderr.log")
        texts[rank] = open(path).read() + (open(err).read() if os.path.exists(err) else "")
    return texts


def parse_rank(text):
    result = {}
    bench = re.search(r"bench: backend=\S+ runs=(\d+) median_ms=(\S+) min_ms=(\S+) "
                      r"max_ms=(\S+)", text)
    if bench:
        result.update(runs=int(bench.group(1)), median_ms=float(bench.group(2)),
                      min_ms=float(bench.group(3)), max_ms=float(bench.group(4)))
    memory = re.search(r"memory: (.*)", text)
    if memory:
        for key, value in re.findall(r"(\w+)=(\d+)", memory.group(1)):
            result[key] = int(value)
        result["program_bytes"] = sum(result.get(k, 0) for k in (
            "arena_bytes", "weight_bytes", "io_bytes", "workspace_bytes"))
    result["losses"] = [float(v) for v in re.findall(r"step \d+ loss (\S+)", text)]
    return result


def run_memopt(key, exe, config, world, work, env, runs, timeout, port, say):
    import numpy as np

    graph_name = {**CONFIGS, **SMOKE}[config][0]
    model, batch, size, classes = graph_spec(graph_name)
    inputs = os.path.join(work, "inputs", f"{graph_name}.w{world}")
    if not os.path.exists(inputs + ".y.npy"):
        os.makedirs(os.path.dirname(inputs), exist_ok=True)
        x, y = make_batch(model, batch * world, size, classes)
        np.save(inputs + ".x.npy", x)
        np.save(inputs + ".y.npy", y)
    first = "input" if model == "tiny_convnet" else input_name(model)
    log_dir = os.path.join(work, "logs", key)
    shutil.rmtree(log_dir, ignore_errors=True)
    command = ["torchrun", "--nproc-per-node", str(world), "--master-port", str(port),
               "--log-dir", log_dir, "--redirects", "3", "--no-python", exe,
               "--random-weights", str(SEED), "--input", f"{first}={inputs}.x.npy",
               "--input", f"labels={inputs}.y.npy", "--steps", "2", "--bench", str(runs)]
    begin = time.time()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
        code, launcher = proc.returncode, (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired:
        code, launcher = -1, f"stopped after {timeout} s"
    logs = rank_logs(log_dir)
    entry = {"exit": code, "seconds": round(time.time() - begin, 1), "world": world,
             "ranks": {r: parse_rank(t) for r, t in sorted(logs.items())}}
    if code != 0:
        entry["log_tail"] = {r: t[-2500:] for r, t in logs.items()}
        entry["launcher_tail"] = launcher
    summarize(entry)
    say(f"memopt {key}: exit {code}, {entry.get('median_ms', float('nan')):.2f} ms, "
        f"{entry.get('peak_bytes', 0) / 2**30:.2f} GiB, losses equal across ranks: "
        f"{entry.get('losses_equal')}" + ("" if code == 0 else "\n" + json.dumps(
            entry.get("log_tail"))[-3000:] + "\n" + launcher[-1500:]))
    return entry


def summarize(entry):
    """The slowest rank's median, the largest rank's memory, losses equal on every rank."""
    ranks = [r for r in entry["ranks"].values() if "median_ms" in r]
    if ranks:
        entry["median_ms"] = max(r["median_ms"] for r in ranks)
        entry["rank_median_ms"] = [r["median_ms"] for r in ranks]
    peaks = [r.get("program_bytes") or r.get("peak_allocated_bytes") or 0
             for r in entry["ranks"].values()]
    if peaks:
        entry["peak_bytes"] = max(peaks)
    losses = [r.get("losses") for r in entry["ranks"].values() if r.get("losses")]
    # memopt's ranks other than 0 print errors only (Main.cpp); its loss is the mean over the
    # ranks (an all-reduce), PyTorch's is all-reduced here.
    entry["ranks_reporting_losses"] = len(losses)
    if losses:
        entry["losses_equal"] = all(loss == losses[0] for loss in losses)
        entry["first_loss"], entry["last_loss"] = losses[0][0], losses[0][-1]
        entry["steps"] = len(losses[0])


def cmd_device(args):
    begin_all = time.time()
    deadline = begin_all + args.deadline_s
    carry = os.path.abspath(args.carry)
    out = os.path.abspath(args.out)
    work = args.work
    os.makedirs(out, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    log = open(os.path.join(out, "device_log.txt"), "a")

    def say(text):
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()

    import gpu_bench

    results = {"environment": gpu_bench.torch_environment(), "memopt": {}, "torch": {},
               "settings": {"runs": args.runs, "seed": SEED}}
    results["environment"]["nccl"] = nccl_library()
    path = os.path.join(out, "device.json")

    def save():
        with open(path, "w") as handle:
            json.dump(results, handle, indent=1)

    env = launch_environment(work)
    configs = args.configs or list(CONFIGS)
    port = 29400
    if not args.skip_memopt:
        summary = json.load(open(os.path.join(carry, "prepare.json")))
        keys = [program_key(c, w, m) for c, w, m in
                program_table(configs, args.worlds, args.modes)]
        for key in keys:
            if "error" in summary["programs"].get(key, {"error": "not prepared"}):
                results["memopt"][key] = {"refused": summary["programs"].get(
                    key, {}).get("error", "not prepared")[-400:]}
        exes, failed = build_programs(carry, work, keys, summary, say)
        for key, text in failed.items():
            results["memopt"][key] = {"build_error": text}
        save()
        for config, world, mode in program_table(configs, args.worlds, args.modes):
            key = program_key(config, world, mode)
            if key not in exes:
                continue
            if time.time() > deadline - 20:
                results["memopt"][key] = {"error": "deadline"}
                continue
            port += 2
            results["memopt"][key] = run_memopt(
                key, exes[key], config, world, work, env, args.runs,
                min(args.run_timeout_s, max(10, deadline - time.time() - 10)), port, say)
            results["memopt"][key]["mode"] = mode
            save()
    if not args.skip_torch:
        for world in args.worlds:
            left = deadline - time.time() - 5
            if left < 30:
                results["torch"][f"w{world}"] = {"error": "deadline"}
                continue
            port += 2
            target = os.path.join(work, f"torch_w{world}.json")
            command = ["torchrun", "--nproc-per-node", str(world), "--master-port", str(port),
                       os.path.abspath(__file__), "torch-worker", "--out", target, "--runs",
                       str(args.runs), "--configs", *(args.torch_configs or list(CONFIGS)),
                       "--modes",
                       *(args.torch_modes if world > 1 else ["ddp"])]
            begin = time.time()
            try:
                proc = subprocess.run(command, capture_output=True, text=True, env=env,
                                      timeout=left)
                code, text = proc.returncode, proc.stdout + proc.stderr
            except subprocess.TimeoutExpired as error:
                code, text = -1, f"stopped after {left:.0f} s\n{error.stdout or ''}"
            say(f"torch world {world}: exit {code} in {time.time() - begin:.0f} s\n"
                f"{text[-4000:]}")
            runs = json.load(open(target)) if os.path.exists(target) else {}
            for key, entry in runs.items():
                summarize(entry)
                results["torch"][key] = entry
            if code != 0:
                results["torch"][f"w{world}.log_tail"] = text[-3000:]
            save()
    results["seconds"] = round(time.time() - begin_all, 1)
    save()
    print_table(results)
    return 0


def fsdp_blocks(module, model):
    """The units fully_shard wraps one by one (then the root): GPT-2's blocks, ResNet's
    bottlenecks (torchtitan's and the FSDP2 tutorial's per-block wrapping)."""
    if model == "resnet50":
        return [b for layer in (module.layer1, module.layer2, module.layer3, module.layer4)
                for b in layer]
    if model == "tiny_convnet":
        return []
    return list(module.inner.transformer.h)


def cmd_torch_worker(args):
    import gc

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=device)
    torch.backends.cudnn.benchmark = True
    results = {}
    for config in args.configs:
        graph_name, precision, optimizer = CONFIGS[config]
        model, batch, size, classes = graph_spec(graph_name)
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        low = getattr(torch, LOW[precision]) if precision in LOW else None
        x_all, y_all = make_batch(model, batch * world, size, classes)
        x_host = torch.from_numpy(x_all[rank * batch:(rank + 1) * batch]).pin_memory()
        y_host = torch.from_numpy(y_all[rank * batch:(rank + 1) * batch]).pin_memory()
        channels_last = model == "resnet50"
        if channels_last:
            x_host = x_host.contiguous(memory_format=torch.channels_last)
        for mode in args.modes:
            key = f"{config}.w{world}.{mode if world > 1 else 'single'}"
            entry = {"mode": mode if world > 1 else "single", "world": world}
            try:
                module = build_module(model, size, classes).to(device).train()
                # FSDP2 refuses non-contiguous parameters (NotImplementedError in 2.11), so
                # its ResNet keeps NCHW weights (the input stays channels-last).
                if channels_last and TORCH_MODES.get(mode) is None:
                    module = module.to(memory_format=torch.channels_last)
                entry["channels_last_weights"] = channels_last and TORCH_MODES.get(mode) is None
                net = module
                if world > 1 and TORCH_MODES[mode] is None:
                    from torch.nn.parallel import DistributedDataParallel

                    net = DistributedDataParallel(module, device_ids=[local])
                elif world > 1:
                    from torch.distributed.fsdp import fully_shard

                    for block in fsdp_blocks(module, model):
                        fully_shard(block, reshard_after_forward=TORCH_MODES[mode])
                    fully_shard(module, reshard_after_forward=TORCH_MODES[mode])
                if optimizer == "sgd":
                    opt = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)
                else:
                    try:
                        opt = torch.optim.AdamW(module.parameters(), lr=1e-4,
                                                weight_decay=0.01, fused=True)
                        entry["adamw"] = "fused"
                    except Exception:  # noqa: BLE001 - DTensor parameters on older torch
                        opt = torch.optim.AdamW(module.parameters(), lr=1e-4, weight_decay=0.01)
                        entry["adamw"] = "foreach"
                scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")
                losses = []

                def step():
                    x = x_host.to(device, non_blocking=True)
                    y = y_host.to(device, non_blocking=True)
                    with torch.autocast("cuda", dtype=low or torch.float32,
                                        enabled=low is not None):
                        logits = net(x)
                        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                               y.reshape(-1))
                    scaler.scale(loss).backward()
                    if scaler.is_enabled():
                        scaler.step(opt)
                        scaler.update()
                    else:
                        opt.step()
                    opt.zero_grad(set_to_none=True)
                    losses.append(loss.detach())

                for _ in range(5):
                    step()
                torch.cuda.synchronize()
                gc.collect()
                torch.cuda.reset_peak_memory_stats()
                step()
                torch.cuda.synchronize()
                entry["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
                entry["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
                start = torch.cuda.Event(enable_timing=True)
                stop = torch.cuda.Event(enable_timing=True)
                times = []
                for _ in range(args.runs):
                    start.record()
                    step()
                    stop.record()
                    stop.synchronize()
                    times.append(start.elapsed_time(stop))
                mean = torch.stack(losses)
                dist.all_reduce(mean, op=dist.ReduceOp.AVG)
                entry.update(median_ms=statistics.median(times), min_ms=min(times),
                             max_ms=max(times), runs=args.runs,
                             losses=[float(v) for v in mean.cpu()],
                             local_losses=[float(v) for v in torch.stack(losses).cpu()])
                if world > 1 and TORCH_MODES[mode] is None:
                    # DDP keeps whole replicas: they must agree bit for bit.
                    total = sum(float(p.detach().double().sum()) for p in module.parameters())
                    sums = [None] * world
                    dist.all_gather_object(sums, total)
                    entry["replicas_equal"] = all(s == sums[0] for s in sums)
            except Exception as error:  # noqa: BLE001 - recorded per run
                entry["error"] = f"{type(error).__name__}: {str(error)[:1500]}"
            net = module = opt = None  # noqa: F841
            gc.collect()
            torch.cuda.empty_cache()
            gathered = [None] * world
            dist.all_gather_object(gathered, entry)
            if rank == 0:
                results[key] = {"mode": entry["mode"], "world": world,
                                "ranks": {r: e for r, e in enumerate(gathered)}}
                errors = [e["error"] for e in gathered if "error" in e]
                if errors:
                    results[key]["error"] = errors[0]
                print(f"torch {key}: " + ", ".join(
                    f"rank {r} {e.get('median_ms', float('nan')):.2f} ms "
                    f"{e.get('peak_allocated_bytes', 0) / 2**30:.2f} GiB"
                    for r, e in enumerate(gathered)) + (f" ERROR {errors[0][:300]}"
                                                        if errors else ""), flush=True)
                with open(args.out, "w") as handle:
                    json.dump(results, handle, indent=1)
            dist.barrier()
    dist.destroy_process_group()
    return 0


# ----------------------------------------------------------------------------------------------
# report (here)


def table_rows(results, configs=None):
    """Rows of (config, world, column, ms, GiB, losses equal) for every run."""
    rows = []
    for side in ("memopt", "torch"):
        for key, entry in sorted(results.get(side, {}).items()):
            if "." not in key or key.endswith("log_tail"):
                continue
            config, rest = key.rsplit(".w", 1)
            world, mode = rest.split(".", 1)
            column = ("memopt " + mode) if side == "memopt" else (
                "PyTorch" if mode == "single" else {"ddp": "DDP", "fsdp2": "FSDP2",
                                                    "fsdp2-keep": "FSDP2 keep"}[mode])
            rows.append((config, int(world), column, entry))
    return rows


COLUMNS = ["memopt none", "memopt optimizer", "memopt gradients", "memopt parameters",
           "PyTorch", "DDP", "FSDP2", "FSDP2 keep"]


def cell(entry):
    if entry is None:
        return ""
    if "median_ms" in entry:
        text = f"{entry['median_ms']:.1f} ms / {entry.get('peak_bytes', 0) / 2**30:.2f} GiB"
        if entry.get("losses_equal") is False:
            text += " (losses differ across ranks)"
        return text
    if "refused" in entry:
        return "not built"
    return "failed"


def print_table(results, out=sys.stdout):
    rows = table_rows(results)
    grid = {}
    for config, world, column, entry in rows:
        grid.setdefault((config, world), {})[column] = entry
    used = [c for c in COLUMNS if any(c in v for v in grid.values())]
    out.write("| config | GPUs | " + " | ".join(used) + " |\n")
    out.write("| --- | ---: | " + " | ".join("---" for _ in used) + " |\n")
    for (config, world), cells in sorted(grid.items()):
        out.write(f"| {config} | {world} | " + " | ".join(cell(cells.get(c)) for c in used) +
                  " |\n")


# Weak scaling: (column on 2 GPUs, its 1-GPU reference) -> the JSON's key.
SCALING = {"memopt_none": ("memopt none", "memopt none"),
           "memopt_optimizer": ("memopt optimizer", "memopt none"),
           "memopt_gradients": ("memopt gradients", "memopt none"),
           "ddp": ("DDP", "PyTorch"), "fsdp2": ("FSDP2", "PyTorch"),
           "fsdp2_keep": ("FSDP2 keep", "PyTorch")}


def weak_scaling(results):
    """{config: {key: 1-GPU step / 2-GPU step}} (the same per-GPU batch: 1.0 is perfect)."""
    rows = table_rows(results)
    times = {(c, w, col): e.get("median_ms") for c, w, col, e in rows}
    scaling = {}
    for config in sorted({c for c, _, _, _ in rows}):
        for key, (column, single) in SCALING.items():
            one, two = times.get((config, 1, single)), times.get((config, 2, column))
            scaling.setdefault(config, {})[key] = round(one / two, 4) if one and two else None
    return scaling


def print_scaling(scaling, out=sys.stdout):
    out.write("\n| config | " + " | ".join(SCALING) + " |\n")
    out.write("| --- |" + " ---: |" * len(SCALING) + "\n")
    for config, cells in scaling.items():
        out.write(f"| {config} | " + " | ".join(
            f"{100 * cells[k]:.0f}%" if cells.get(k) else "" for k in SCALING) + " |\n")


def cmd_report(args):
    results = {"memopt": {}, "torch": {}}
    for call, path in enumerate(args.device_json, 1):
        data = json.load(open(path))
        for side in ("memopt", "torch"):
            for key, entry in data.get(side, {}).items():
                if isinstance(entry, dict) and ("median_ms" in entry or
                                                key not in results[side]):
                    if "ranks" in entry:
                        summarize(entry)
                    entry["call"] = call
                    results[side][key] = entry
        results["environment"] = data.get("environment")
        results["settings"] = data.get("settings")
    prepare = json.load(open(args.prepare_json)) if args.prepare_json else {}
    # One small JSON: the figures, not the logs.
    slim = {"environment": results.get("environment"), "settings": results.get("settings"),
            "commit": prepare.get("commit"), "runs": {}}
    for config, world, column, entry in table_rows(results):
        record = {k: entry[k] for k in ("median_ms", "peak_bytes", "rank_median_ms",
                                        "losses_equal", "ranks_reporting_losses",
                                        "first_loss", "last_loss", "steps", "call")
                  if k in entry}
        if "refused" in entry:
            record["refused"] = entry["refused"].strip().splitlines()[0][-300:]
        elif "median_ms" not in entry:
            record["error"] = str(entry.get("error") or entry.get("build_error") or
                                  entry.get("log_tail") or entry.get("exit"))[-600:]
        for rank in entry.get("ranks", {}).values():
            if "replicas_equal" in rank:
                record["replicas_equal"] = rank["replicas_equal"]
        record.update(config=config, gpus=world, mode=column)
        slim["runs"][f"{config}.w{world}.{column.replace(' ', '_')}"] = record
    slim["weak_scaling"] = weak_scaling(results)
    if args.json_out:
        with open(args.json_out, "w") as handle:
            json.dump(slim, handle, indent=1)
    print_table(results)
    print_scaling(slim["weak_scaling"])
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("--out", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--graphs", help="exported graphs: a folder or export's graphs.tar.xz")
    p.add_argument("--dest", required=True, help="the carry folder")
    p.add_argument("--work", default="/tmp/dp_bench_work")
    p.add_argument("--compile", default=os.path.join(REPO, "build", "bin", "memopt-compile"))
    p.add_argument("--configs", nargs="*", choices=list(CONFIGS) + list(SMOKE))
    p.add_argument("--modes", nargs="*", default=list(SHARD_MODES))
    p.add_argument("--worlds", nargs="*", type=int, default=list(WORLDS))
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--force", action="store_true", help="recompile programs already there")
    p.add_argument("--runtime", default=os.path.join(REPO, "build", "lib", "Runtime"),
                   help="folder of libmemopt_runtime_{main,driver,common}.a")
    p.add_argument("--runtime-cuda", default=os.path.join(REPO, "build", "lib", "Runtime"),
                   help="folder of libmemopt_runtime_cuda.a")
    p = sub.add_parser("device")
    p.add_argument("--carry", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/dp_bench")
    p.add_argument("--configs", nargs="*", choices=list(CONFIGS) + list(SMOKE))
    p.add_argument("--modes", nargs="*", default=list(SHARD_MODES))
    p.add_argument("--torch-modes", nargs="*", default=list(TORCH_MODES))
    p.add_argument("--torch-configs", nargs="*", choices=list(CONFIGS))
    p.add_argument("--worlds", nargs="*", type=int, default=list(WORLDS))
    p.add_argument("--runs", type=int, default=RUNS)
    p.add_argument("--run-timeout-s", type=float, default=120)
    p.add_argument("--deadline-s", type=float, default=440)
    p.add_argument("--skip-memopt", action="store_true")
    p.add_argument("--skip-torch", action="store_true")
    p = sub.add_parser("torch-worker")
    p.add_argument("--out", required=True)
    p.add_argument("--runs", type=int, default=RUNS)
    p.add_argument("--configs", nargs="+", required=True)
    p.add_argument("--modes", nargs="+", required=True)
    p = sub.add_parser("report")
    p.add_argument("--device-json", nargs="+", required=True)
    p.add_argument("--prepare-json")
    p.add_argument("--json-out")
    args = parser.parse_args()
    return {"export": cmd_export, "prepare": cmd_prepare, "device": cmd_device,
            "torch-worker": cmd_torch_worker, "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
