"""prepare (here): compile, build the runtime and the executables into the carry folder."""

import glob
import json
import os
import shutil
import subprocess
import time

from .configs import (BENCH, CHECKS, OPTIMIZERS, PACKAGE, REPO, SCRIPT, parse_remat_failure,
                      precision_suffix, remat_budget, remat_suffix)


def runtime_sources(dest):
    """A snapshot of the runtime's sources at HEAD (others edit the working tree)."""
    src = os.path.join(dest, "src")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                          text=True).stdout.strip()
    stamp = os.path.join(src, "COMMIT")
    if os.path.exists(stamp) and open(stamp).read().strip() == head:
        return src, head  # unchanged: keep the timestamps (no rebuild)
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    subprocess.run(f"git archive HEAD lib/Runtime include unittests/Runtime test/GPU "
                   f"scripts/gpu_check.sh | "
                   f"tar -x -C {src}", shell=True, cwd=REPO, check=True)
    with open(stamp, "w") as handle:
        handle.write(head + "\n")
    return src, head


def build_runtime(src, build, cuda, jobs):
    targets = "memopt_runtime_main memopt_runtime_driver memopt_runtime_common " + \
        ("memopt_runtime_cuda" if cuda else "memopt_runtime_host")
    flags = "-DMEMOPT_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90" if cuda else \
        "-DMEMOPT_ENABLE_CUDA=OFF"
    subprocess.run(f"cmake -S {src}/lib/Runtime -B {build} -G Ninja -DCMAKE_BUILD_TYPE=Release "
                   f"{flags} >/dev/null && cmake --build {build} -j {jobs} --target {targets}",
                   shell=True, check=True)


def frozen_constants(graph):
    """Float initializers that are no parameters of the PyTorch model: the exporter's scalar
    constants (and a folded attention mask, 'where'). memopt-compile --train trains every float
    initializer that --freeze does not name; a trained -inf mask or scalar gives NaN gradients.
    Folded copies of parameters (ViT's transposed weights, its expanded class token) stay
    trainable: they are the parameters, in another layout."""
    import onnx

    proto = onnx.load(graph, load_external_data=False)
    names = []
    for tensor in proto.graph.initializer:
        count = 1
        for dim in tensor.dims:
            count *= dim
        if tensor.data_type == onnx.TensorProto.FLOAT and (count <= 1 or tensor.name == "where"):
            names.append(tensor.name)
    # The exporter gives every ResNet convolution a zero bias (val_N) that
    # torchvision's model does not have (bias=False before BatchNorm): frozen,
    # so that both sides train the same parameters. Their exact gradient is
    # zero anyway (batch statistics subtract any per-channel constant).
    initializers = {tensor.name for tensor in proto.graph.initializer}
    consumers = {}
    for node in proto.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node.op_type)
    for node in proto.graph.node:
        if (node.op_type == "Conv" and len(node.input) > 2 and node.input[2] in initializers
                and consumers.get(node.output[0]) == ["BatchNormalization"]
                and node.input[2] not in names):
            names.append(node.input[2])
    return names


def graphs_folder(graphs, work):
    """The folder of NAME.onnx graphs: `graphs` itself, or a .tar.gz of them (an export call's
    train_graphs.tar.gz) unpacked under WORK/graphs."""
    if not graphs.endswith(".tar.gz"):
        return os.path.abspath(graphs)
    import tarfile

    folder = os.path.join(work, "graphs")
    shutil.rmtree(folder, ignore_errors=True)
    with tarfile.open(graphs) as tar:
        tar.extractall(folder, filter="data")
    return folder


def with_weights(graph, work):
    """`graph` if its external data is there, else a copy with weights filled in under
    WORK/filled (python/models/fill_weights.py; exports come back from the device without
    their .data files, and the executables run with --random-weights anyway)."""
    import onnx

    proto = onnx.load(graph, load_external_data=False)
    folder = os.path.dirname(graph)
    missing = False
    for tensor in proto.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location" and not os.path.exists(os.path.join(folder, entry.value)):
                missing = True
    if not missing:
        return graph
    import fill_weights  # python/models (configs.py put it on the path)

    filled = os.path.join(work, "filled")
    fill_weights.fill(graph, filled, log=open(os.devnull, "w"))
    return os.path.join(filled, os.path.basename(graph))


def compile_one(command, out, key, programs, summary, precision, extra=None, timeout=None):
    """Runs one memopt-compile; records its report (or its error) in summary["configs"][key].
    Returns the report, or None when it failed. An infeasible --memory-budget is recorded
    with the smallest arena memopt reached."""
    begin = time.time()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        code, text = proc.returncode, (proc.stderr or proc.stdout).strip()
    except subprocess.TimeoutExpired:
        code, text = -1, f"memopt-compile stopped after {timeout} s"
    seconds = time.time() - begin
    shown = "memopt-compile GRAPH.onnx " + " ".join(
        os.path.basename(c) if c.startswith(programs) else c for c in command[2:])
    if code != 0:
        entry = {"error": text[-3000:], "command": shown, "compile_s": round(seconds, 1),
                 "precision": precision, **(extra or {})}
        entry.update(parse_remat_failure(text))
        summary["configs"][key] = entry
        print(f"{key}: memopt-compile FAILED ({seconds:.1f} s)\n{text[-3000:]}")
        return None
    report = json.load(open(out + ".report.json"))
    report.pop("buffers", None)
    report.pop("live_bytes_per_op", None)
    # memopt-layout's line ("[layout] auto: 0 of 53 convolutions channels-last, ..."), which
    # says what --layout gave the program (training steps too: docs/layout.md, "Training").
    layout_line = next((line for line in proc.stdout.splitlines()
                        if line.startswith("[layout]")), None)
    summary["configs"][key] = {"compile_s": round(seconds, 1), "command": shown,
                               "report": report, "precision": precision,
                               "layout_line": layout_line,
                               "source_bytes": os.path.getsize(out + ".cu"), **(extra or {})}
    remat = report.get("remat") or {}
    print(f"{key}: compiled in {seconds:.1f} s, arena "
          f"{report['arena_bytes'] / 2**20:.1f} MiB, training "
          f"{json.dumps(report.get('training'))}" +
          (f", {remat.get('recomputed_ops')} ops recomputed (+"
           f"{100 * remat.get('added_time_fraction', 0):.2f}% estimated)" if remat else ""))
    return report


def add_build_jobs(jobs, name, key, out, src, rt_host, dest):
    """nvcc of the CUDA object (the runtime library travels once; linked on the device), and
    for the gradient-check configurations the host executable."""
    inc = os.path.join(src, "include")
    lib = lambda n: os.path.join(rt_host, f"libmemopt_runtime_{n}.a")  # noqa: E731
    jobs.append(((key, "cuda"), ["nvcc", "-std=c++17", "-O1", "-arch=sm_90", "-c",
                                 out + ".cu", f"-I{inc}", "-o",
                                 os.path.join(dest, "obj", key + ".cuda.o")]))
    if name in CHECKS:
        jobs.append(((key, "host"),
                     ["sh", "-c",
                      f"g++ -std=c++17 -O1 -x c++ {out}.cu -x none -I{inc} "
                      f"{lib('main')} {lib('driver')} {lib('host')} {lib('common')} "
                      f"-lpthread -o {os.path.join(dest, 'bin', key)}.host"]))


def copy_entry_point(dest):
    """The command line and its package into the carry folder (DEST/train_bench.py and
    DEST/train_bench/): the device call runs `python3 DEST/train_bench.py device ...`."""
    shutil.copy(SCRIPT, os.path.join(dest, "train_bench.py"))
    shutil.copy(os.path.join(os.path.dirname(SCRIPT), "device_env.py"),
                os.path.join(dest, "device_env.py"))
    package = os.path.join(dest, os.path.basename(PACKAGE))
    shutil.rmtree(package, ignore_errors=True)
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def cmd_prepare(args):
    dest = os.path.abspath(args.dest)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    src, commit = runtime_sources(work)
    rt_cuda, rt_host = os.path.join(work, "rt-cuda"), os.path.join(work, "rt-host")
    if not args.skip_runtime:
        build_runtime(src, rt_cuda, True, args.jobs)
        build_runtime(src, rt_host, False, args.jobs)
    compile_bin = os.path.abspath(args.compile)
    for sub in ("bin", "obj", "rt"):
        os.makedirs(os.path.join(dest, sub), exist_ok=True)
    for n in ("main", "driver", "cuda", "common"):
        shutil.copy(os.path.join(rt_cuda, f"libmemopt_runtime_{n}.a"), os.path.join(dest, "rt"))
    programs = os.path.join(work, "programs")
    os.makedirs(programs, exist_ok=True)
    summary = {"commit": commit, "configs": {}}
    summary_path = os.path.join(dest, "prepare.json")
    if os.path.exists(summary_path):
        summary["configs"] = json.load(open(summary_path)).get("configs", {})
    jobs = []  # (key, command) builds, run after the compiles
    graphs = graphs_folder(args.graphs, work)
    filled = {}  # configuration -> its graph with weights
    table = [(n, c, opt) for n, c in BENCH.items() for opt in OPTIMIZERS] + \
        [(n, c, "sgd") for n, c in CHECKS.items()]
    for name, (model, batch, size, classes), opt in table:
        key = f"{name}.{opt}"
        if args.only and name not in args.only and key not in args.only:
            continue
        graph = os.path.join(graphs, f"{name}.onnx")
        if not os.path.exists(graph):
            summary["configs"][key] = {"error": "graph not exported"}
            print(f"{key}: no graph")
            continue
        if name not in filled:
            filled[name] = with_weights(graph, work)
        graph = filled[name]
        suffix = precision_suffix(args.precision)
        out = os.path.join(programs, key + suffix)
        command = [compile_bin, graph, "--train", "--loss", "cross-entropy", "--loss-output",
                   "logits" if model != "tiny_convnet" else "output", *OPTIMIZERS[opt],
                   "--target", "cuda", "--arch", "sm_90", "--emit", "source", "-o", out,
                   "--report", out + ".report.json", "--precision", args.precision]
        if args.layout:
            command += ["--layout", args.layout]
        if model in ("resnet50", "tiny_convnet"):
            command.append("--bn-batch-stats")
        frozen = frozen_constants(graph)
        if frozen:
            command += ["--freeze", ",".join(frozen)]
        previous = summary["configs"].get(key + suffix, {})
        if (args.remat_only and "report" in previous and
                os.path.exists(os.path.join(dest, "obj", key + suffix + ".cuda.o"))):
            # The unconstrained program is in the carry already: its report gives the budgets.
            report = previous["report"]
            print(f"{key}: unconstrained program kept (arena "
                  f"{report['arena_bytes'] / 2**20:.1f} MiB)")
        else:
            report = compile_one(command, out, key + suffix, programs, summary, args.precision)
            if report is None:
                continue
            add_build_jobs(jobs, name, key + suffix, out, src, rt_host, dest)
        for fraction in args.budget_fractions:
            variant = key + suffix + remat_suffix(fraction)
            budget = remat_budget(report, fraction)
            out_remat = os.path.join(programs, variant)
            extra = ["--memory-budget", str(budget["budget_bytes"])]
            if args.remat_time_limit is not None:
                extra += ["--remat-time-limit", str(args.remat_time_limit)]
            if args.remat_allow:
                extra += ["--remat-allow", args.remat_allow]
            if args.remat_max_computations is not None:
                extra += ["--remat-max-computations", str(args.remat_max_computations)]
            times = os.path.join(args.remat_kernel_times or "", f"times_{key}{suffix}.json")
            if args.remat_kernel_times and os.path.exists(times):
                extra += ["--remat-kernel-times", os.path.abspath(times)]
                budget["kernel_times"] = os.path.basename(times)
            remat_command = [out_remat if c == out else
                             out_remat + ".report.json" if c == out + ".report.json" else c
                             for c in command] + extra
            print(f"{variant}: --memory-budget {budget['budget_bytes']} = gradients at the "
                  f"peak {budget['gradient_bytes_at_peak']} + {fraction} x activation arena "
                  f"{budget['activation_arena_bytes']}")
            for stale in (os.path.join(dest, "obj", variant + ".cuda.o"),
                          os.path.join(dest, "bin", variant + ".host")):
                if os.path.exists(stale):  # an earlier prepare's program of this name
                    os.remove(stale)
            if compile_one(remat_command, out_remat, variant, programs, summary,
                           args.precision, extra={"remat_budget": budget},
                           timeout=args.remat_compile_timeout_s) is not None:
                add_build_jobs(jobs, name, variant, out_remat, src, rt_host, dest)
    import gpu_bench

    def done(key, code, text, seconds):
        entry = summary["configs"].setdefault(key[0], {})
        if code != 0:
            entry[f"{key[1]}_build_error"] = text[-3000:]
            print(f"{key[0]}: {key[1]} build FAILED\n{text[-3000:]}")
        else:
            entry[f"{key[1]}_build_s"] = round(seconds, 1)
            if key[1] == "host":
                subprocess.run(["strip", os.path.join(dest, "bin", f"{key[0]}.host")])
            print(f"{key[0]}: {key[1]} built in {seconds:.0f} s")

    gpu_bench.run_parallel(jobs, args.jobs, time.time() + 3600, done, print)
    copy_entry_point(dest)
    # The runtime's sources at this commit, for gpu_check.sh on the device (the kernel
    # suite of this commit, not of the checkout the device call ships).
    shutil.rmtree(os.path.join(dest, "src"), ignore_errors=True)
    shutil.copytree(src, os.path.join(dest, "src"))
    with open(summary_path, "w") as handle:
        json.dump(summary, handle, indent=1)
    total = sum(os.path.getsize(f) for f in glob.glob(os.path.join(dest, "**"), recursive=True)
                if os.path.isfile(f))
    print(f"carry folder {dest}: {total / 2**20:.1f} MiB")
    return 0
