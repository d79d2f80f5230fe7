"""device (GPU): linking the carry's executables, the gradient checks, memopt's --bench runs,
and the PyTorch side (eager, checkpoint, torch.compile, activation budgets; torch-one, a child
process per model)."""

import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import device_env  # bench/device_env.py, or its copy beside the carry's train_bench.py

from .configs import (BENCH, CHECKS, OPTIMIZERS, REPO, SCRIPT, SEED, build_module, input_name,
                      log_to, make_batch, precision_suffix, remat_suffix)


def library_path():
    """cuDNN and cuBLAS from PyTorch's wheels, then the toolkit's (bench/device_env.py)."""
    paths = device_env.wheel_library_dirs(("nvidia.cudnn", "nvidia.cublas", "nvidia.cu13"))
    paths += [p for p in [device_env.CUDA_TOOLKIT_LIB] if os.path.isdir(p)]
    return ":".join(paths)


def parse_bench(text):
    import gpu_bench

    result = gpu_bench.parse_bench(text)
    result.pop("beyond_weights_bytes", None)
    if "arena_bytes" in result:
        result["total_bytes"] = (result["weight_bytes"] + result["arena_bytes"] +
                                 result["io_bytes"] + result["workspace_bytes"])
        # The weight region holds the training state (parameters, optimizer state, BN
        # statistics, constants); gradients live in the arena.
        result["beyond_state_bytes"] = result["total_bytes"] - result["weight_bytes"]
    losses = [float(v) for v in re.findall(r"step \d+ loss (\S+)", text)]
    if losses:
        result["first_loss"], result["last_loss"] = losses[0], losses[-1]
    return result


def run_streamed(command, timeout, env):
    """Runs `command`, reading its output as it comes; stops it after `timeout` seconds.
    Returns (exit code or -1 on timeout, output, times of its `step N loss` lines)."""
    import threading

    # The executable's stdout is block-buffered into a pipe: stdbuf -oL makes each step line
    # arrive when it is printed (added after the second device call, whose step lines all
    # arrived at the end).
    if shutil.which("stdbuf"):
        command = ["stdbuf", "-oL"] + list(command)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    lines, stamps = [], []

    def reader():
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("step "):
                stamps.append(time.time())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        code = proc.wait(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = -1
        lines.append(f"\n[stopped after {timeout:.0f} s]\n")
    thread.join(timeout=5)
    return code, "".join(lines), stamps


def grad_check(bin_dir, work, name, say, env, suffix=""):
    """One SGD-momentum step on CUDA and on the host backend (same seed and inputs), then the
    momentum buffers (= the first-step gradients) compared."""
    import numpy as np

    model, batch, size, classes = CHECKS[name]
    x, y = make_batch(model, batch, size, classes)
    base = os.path.join(work, "check", name)
    os.makedirs(base, exist_ok=True)
    np.save(os.path.join(base, "x.npy"), x)
    np.save(os.path.join(base, "y.npy"), y)
    first = input_name(model) if model != "tiny_convnet" else "input"
    result = {}
    for backend in ("host", "cuda"):
        exe = os.path.join(bin_dir, f"{name}.sgd{suffix}.{backend}")
        state = os.path.join(base, backend)
        shutil.rmtree(state, ignore_errors=True)
        command = [exe, "--random-weights", str(SEED), "--input",
                   f"{first}={os.path.join(base, 'x.npy')}", "--input",
                   f"labels={os.path.join(base, 'y.npy')}", "--steps", "1", "--save-state",
                   state]
        begin = time.time()
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
        except subprocess.TimeoutExpired:
            result[backend] = {"error": "timeout 240 s"}
            say(f"check {name} {backend}: timeout")
            return result
        text = proc.stdout + proc.stderr
        result[backend] = {"exit": proc.returncode, "seconds": round(time.time() - begin, 1),
                           "log_tail": text[-3000:]}
        loss = re.findall(r"step 1 loss (\S+)", text)
        if loss:
            result[backend]["loss"] = float(loss[0])
        if proc.returncode != 0:
            say(f"check {name} {backend}: FAILED exit {proc.returncode}\n{text[-2000:]}")
            return result
    worst, rows = None, []
    for path in sorted(glob.glob(os.path.join(base, "host", "*.momentum_buffer.npy"))):
        other = os.path.join(base, "cuda", os.path.basename(path))
        a = np.load(path).astype(np.float64)
        b = np.load(other).astype(np.float64) if os.path.exists(other) else None
        if b is None or a.shape != b.shape:
            rows.append({"name": os.path.basename(path), "error": "missing or other shape"})
            continue
        norm = float(np.linalg.norm(a))
        rel = float(np.linalg.norm(b - a)) / max(norm, 1e-30)
        finite = bool(np.isfinite(b).all())
        rows.append({"name": os.path.basename(path)[:-len(".momentum_buffer.npy")],
                     "rel_l2": rel if finite else float("inf"), "host_norm": norm,
                     "elements": int(a.size)})
        if worst is None or not finite or rel > worst["rel_l2"]:
            worst = rows[-1]
    rows.sort(key=lambda r: -r.get("rel_l2", float("inf")))
    # Gradients that are zero in exact arithmetic (a bias before a batch-statistics BN) hold
    # rounding noise on both backends: also the worst over tensors whose norm is at least
    # 1e-4 of the largest one, and the relative L2 of all gradients together.
    norms = [r["host_norm"] for r in rows if "host_norm" in r and np.isfinite(r["host_norm"])]
    if norms:
        floor = 1e-4 * max(norms)
        big = [r for r in rows if r.get("host_norm", 0) >= floor]
        result["worst_significant"] = max(big, key=lambda r: r["rel_l2"]) if big else None
        num = den = 0.0
        for path in sorted(glob.glob(os.path.join(base, "host", "*.momentum_buffer.npy"))):
            other = os.path.join(base, "cuda", os.path.basename(path))
            if os.path.exists(other):
                a = np.load(path).astype(np.float64)
                b = np.load(other).astype(np.float64)
                if a.shape == b.shape:
                    num += float(np.sum((a - b) ** 2))
                    den += float(np.sum(a ** 2))
        result["global_rel_l2"] = (num ** 0.5) / max(den ** 0.5, 1e-30)
        result["host_finite"] = all(np.isfinite(r.get("host_norm", 0)) for r in rows)
    result["tensors"] = len(rows)
    result["worst"] = worst
    result["top"] = rows[:8]
    result["errors"] = [r for r in rows if "error" in r]
    if "loss" in result.get("host", {}) and "loss" in result.get("cuda", {}):
        h, c = result["host"]["loss"], result["cuda"]["loss"]
        result["loss_rel"] = abs(c - h) / max(abs(h), 1e-30)
    say(f"check {name}: global rel L2 {result.get('global_rel_l2')}, worst significant "
        f"{result.get('worst_significant')}")
    say(f"check {name}: {len(rows)} gradients, worst rel L2 "
        f"{worst['rel_l2'] if worst else float('nan'):.2e} ({worst['name'] if worst else '-'}), "
        f"loss host {result.get('host', {}).get('loss')} cuda {result.get('cuda', {}).get('loss')}")
    return result


def dump_compare(bin_dir, work, name, say, env, out):
    """Runs one step of a check configuration on both backends with --dump-ops and compares
    every op's results in program order (the host backend is the reference): the first op
    whose results differ, and the worst ones."""
    import numpy as np

    model, batch, size, classes = CHECKS[name]
    base = os.path.join(work, "check", name)
    first = input_name(model) if model != "tiny_convnet" else "input"
    dirs = {}
    for backend in ("host", "cuda"):
        exe = os.path.join(bin_dir, f"{name}.sgd.{backend}")
        dump = os.path.join(work, "dump", name, backend)
        shutil.rmtree(dump, ignore_errors=True)
        os.makedirs(dump)
        proc = subprocess.run([exe, "--random-weights", str(SEED), "--input",
                               f"{first}={os.path.join(base, 'x.npy')}", "--input",
                               f"labels={os.path.join(base, 'y.npy')}", "--steps", "1",
                               "--dump-ops", dump], capture_output=True, text=True,
                              timeout=240, env=env)
        if proc.returncode != 0:
            say(f"dump {name} {backend}: FAILED {(proc.stdout + proc.stderr)[-1500:]}")
            return {"error": (proc.stdout + proc.stderr)[-1500:]}
        dirs[backend] = dump
    rows = []
    for line in open(os.path.join(dirs["host"], "ops.txt")):
        parts = line.split(" ", 3)
        if len(parts) < 4:
            continue
        file, kind, node, shape = parts
        a = np.load(os.path.join(dirs["host"], file)).astype(np.float64)
        other = os.path.join(dirs["cuda"], file)
        if not os.path.exists(other):
            rows.append({"file": file, "kind": kind, "node": node, "error": "missing"})
            continue
        b = np.load(other).astype(np.float64)
        if a.shape != b.shape or a.dtype.kind not in "fc":
            if a.shape != b.shape:
                rows.append({"file": file, "kind": kind, "node": node, "error": "shape"})
            continue
        norm = float(np.linalg.norm(a))
        diff = float(np.linalg.norm(a - b))
        rows.append({"file": file, "kind": kind, "node": node, "shape": shape.strip(),
                     "norm": norm, "rel": diff / max(norm, 1e-30),
                     "max_abs": float(np.max(np.abs(a - b))) if a.size else 0.0})
    scale = max([r.get("norm", 0) for r in rows] + [1e-30])
    significant = [r for r in rows if r.get("norm", 0) >= 1e-6 * scale]
    first_bad = next((r for r in significant if r.get("rel", 0) > 1e-4), None)
    worst = sorted(significant, key=lambda r: -r.get("rel", 0))[:15]
    result = {"ops": len(rows), "first_over_1e-4": first_bad, "worst": worst}
    with open(os.path.join(out, f"dump_{name}.json"), "w") as handle:
        json.dump({"summary": result, "rows": rows}, handle)
    say(f"dump {name}: {len(rows)} op results compared; first over 1e-4: {first_bad}")
    for r in worst[:8]:
        say(f"  worst {r['rel']:.2e} {r['kind']} {r['node']} {r.get('shape')}")
    shutil.rmtree(os.path.join(work, "dump", name), ignore_errors=True)
    return result


def profile_one(bin_dir, name, opt, inputs, env, out, say, suffix=""):
    """One eager step timed op by op (--profile, after two untimed steps); each node's
    forward time also as OUT/times_NAME.OPT[SUFFIX].json (--profile-times), which `prepare
    --remat-kernel-times DIR` gives the budgeted compiles."""
    model = BENCH[name][0]
    exe = os.path.join(bin_dir, f"{name}.{opt}{suffix}.cuda")
    command = [exe, "--random-weights", str(SEED), "--input",
               f"{input_name(model)}={inputs[name][0]}", "--input",
               f"labels={inputs[name][1]}", "--steps", "3", "--profile-times",
               os.path.join(out, f"times_{name}.{opt}{suffix}.json")]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
        text = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        text = "[timeout 120 s]"
    with open(os.path.join(out, f"profile_{name}.{opt}{suffix}.txt"), "w") as handle:
        handle.write(text)
    lines = [line for line in text.splitlines() if line.startswith("profile")]
    say(f"profile {name}.{opt}:\n" + "\n".join(lines[:40]))
    return lines


def link_executables(carry, work, results, say):
    """Links the carry's CUDA objects with its runtime (both built on the development
    machine) into WORK/bin, with cuDNN / cuBLASLt from PyTorch's wheels; copies the host
    executables there. Returns that folder."""
    # Link the CUDA executables (objects and runtime built on the development machine).
    link_dir = os.path.join(work, "link")
    os.makedirs(link_dir, exist_ok=True)
    for path in library_path().split(":"):
        for lib_name in ("libcudnn.so", "libcublasLt.so"):
            found = sorted(glob.glob(os.path.join(path, lib_name + "*")))
            target = os.path.join(link_dir, lib_name)
            if found and not os.path.exists(target):
                os.symlink(found[0], target)
    rt = lambda n: os.path.join(carry, "rt", f"libmemopt_runtime_{n}.a")  # noqa: E731
    exe_dir = os.path.join(work, "bin")
    os.makedirs(exe_dir, exist_ok=True)
    link_jobs = []
    for obj in sorted(glob.glob(os.path.join(carry, "obj", "*.cuda.o"))):
        key = os.path.basename(obj)[:-len(".cuda.o")]
        link_jobs.append((key, ["nvcc", "-arch=sm_90", obj, rt("main"), rt("driver"), rt("cuda"),
                                rt("common"), f"-L{link_dir}", "-lcublasLt", "-lcudnn", "-o",
                                os.path.join(exe_dir, key + ".cuda")]))
    for exe in glob.glob(os.path.join(carry, "bin", "*.host")):
        shutil.copy(exe, exe_dir)
    results["link_errors"] = {}

    def linked(key, code, text, seconds):
        if code != 0:
            results["link_errors"][key] = text[-2000:]
            say(f"link {key}: FAILED\n{text[-1500:]}")

    import gpu_bench

    gpu_bench.run_parallel(link_jobs, 16, time.time() + 120, linked, say)
    return exe_dir


def cmd_device(args):
    import numpy as np

    begin_all = time.time()
    deadline = begin_all + args.deadline_s
    carry = os.path.abspath(args.carry)
    bin_dir = os.path.join(carry, "bin")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    say = log_to(os.path.join(out, "device_log.txt"))
    work = args.work
    os.makedirs(work, exist_ok=True)
    results = {"settings": {"seed": SEED, "runs": args.runs, "optimizers": OPTIMIZERS},
               "phases": {}, "memopt": {}, "checks": {}, "torch": {}}
    result_path = os.path.join(out, "device.json")

    def save():
        with open(result_path, "w") as handle:
            json.dump(results, handle, indent=1)

    def phase(name):
        results["phases"][name] = round(time.time() - begin_all, 1)
        say(f"== {name} at {results['phases'][name]} s")
        save()

    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = library_path() + ":" + env.get("LD_LIBRARY_PATH", "")
    say(f"LD_LIBRARY_PATH={env['LD_LIBRARY_PATH']}")
    try:
        results["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.sm",
             "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass

    bin_dir = link_executables(carry, work, results, say)
    phase("link_done_s")

    # Phase A (nothing timed): gpu_check.sh, torch.compile warm-ups, gradient checks.
    check_proc = None
    if not args.skip_gpu_check:
        check_log = open(os.path.join(out, "gpu_check_log.txt"), "w")
        source = os.path.join(carry, "src")
        source = source if os.path.exists(os.path.join(source, "scripts")) else REPO
        check_proc = subprocess.Popen(
            ["bash", os.path.join(source, "scripts", "gpu_check.sh"), "/tmp/memopt-gpu-check"],
            stdout=check_log, stderr=subprocess.STDOUT, cwd=source,
            env=dict(os.environ, JOBS="16", CUDA_ARCH="90", SKIP_PERF="1"))
    torch_env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR="/tmp/inductor-cache",
                     PYTHONUNBUFFERED="1")
    warm, held = [], None
    if not args.skip_torch and args.hold_torch:
        # One process per configuration, mode and optimizer compiles now (beside the checks)
        # and is measured after memopt's runs, with no second compile (issue 26's call).
        held_keys = [f"{n}.{m}.{o}" for n in args.configs for m in args.modes
                     for o in args.optimizers]

        def held_command(key, out_path, hold):
            name, rest = key.split(".", 1)
            mode, opt = rest.rsplit(".", 1)
            return [sys.executable, SCRIPT, "torch-one", name, "--out", out_path, "--runs",
                    str(args.runs), "--tf32", args.tf32[0], "--precision", args.precision,
                    "--deadline", str(deadline - 10), "--optimizers", opt, "--modes", mode,
                    "--hold", hold]

        import gpu_bench

        held = gpu_bench.HeldProcesses(held_keys, held_command,
                                       os.path.join(work, "torch_held"), say,
                                       args.compile_jobs, args.warm_cap_s, env=torch_env)
    if not args.skip_torch and not args.no_warm:
        # One warm-up process per configuration and precision: --warm-precisions also
        # compiles those of a later call of this command on this machine (Inductor's cache
        # is in /tmp), so that call can run with --no-warm.
        for name in args.configs:
            for precision in args.warm_precisions or [args.precision]:
                if held is not None and precision == args.precision:
                    continue  # its held process compiles it
                tag = name if precision == args.precision else f"{name}.{precision}"
                log = open(os.path.join(work, f"warm_{tag}.log"), "w")
                warm.append((tag, subprocess.Popen(
                    [sys.executable, SCRIPT, "torch-one", name, "--modes",
                     *[m for m in args.modes if m.startswith("compile")], "--warm-only",
                     "--tf32", args.tf32[0], "--optimizers", "sgd",
                     "--precision", precision,
                     "--out",
                     os.path.join(work, f"warm_{tag}.json")],
                    stdout=log, stderr=subprocess.STDOUT, env=torch_env), log))
    suffix = precision_suffix(args.precision)
    results["precision"] = args.precision
    variants = [""] + [remat_suffix(f) for f in args.budget_fractions]
    for name in args.checks:
        for variant in variants:
            exes = [os.path.join(bin_dir, f"{name}.sgd{suffix}{variant}.{b}")
                    for b in ("host", "cuda")]
            if variant and not all(os.path.exists(e) for e in exes):
                continue  # budgeted check programs are optional (prepare --only NAME)
            results["checks"][name + variant] = grad_check(bin_dir, work, name, say, env,
                                                           suffix + variant)
            save()
    for name in args.dump_checks:
        results.setdefault("dumps", {})[name] = dump_compare(bin_dir, work, name, say, env,
                                                              out)
        save()
    phase("checks_done_s")
    if check_proc is not None:
        try:
            check_proc.wait(timeout=max(10.0, begin_all + args.gpu_check_cap_s - time.time()))
        except subprocess.TimeoutExpired:
            check_proc.kill()
            check_proc.wait()
        check_log.close()
        text = open(os.path.join(out, "gpu_check_log.txt")).read()
        summary = re.findall(r".*passed, \d+ failed.*", text)
        results["gpu_check"] = {"exit": check_proc.returncode,
                                "passed": "GPU CHECK PASSED" in text,
                                "summary": summary[-1] if summary else None,
                                "failures": [line for line in text.splitlines()
                                             if "FAIL" in line][:40]}
        say(f"gpu_check.sh: exit {check_proc.returncode}, {results['gpu_check']['summary']}")
        phase("gpu_check_done_s")

    if held is not None:  # their first steps would disturb memopt's timings
        held.join_compiles()
    # The torch.compile warm-ups run GPU steps too: wait for them before anything is
    # timed (in the third device call memopt's runs beside them took up to 2x as long).
    for name, proc, log in warm:
        try:
            proc.wait(timeout=max(5.0, begin_all + args.warm_cap_s - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            say(f"warm-up {name}: stopped at the cap")
        log.close()
        results.setdefault("warm", {})[name] = open(
            os.path.join(work, f"warm_{name}.log")).read()[-1500:]
    warm = []
    phase("warm_done_s")

    # Phase B1: memopt, one run at a time.
    inputs = {}
    for name in args.configs:
        model, batch, size, classes = BENCH[name]
        x, y = make_batch(model, batch, size, classes)
        inputs[name] = (os.path.join(work, f"{name}.x.npy"), os.path.join(work, f"{name}.y.npy"))
        np.save(inputs[name][0], x)
        np.save(inputs[name][1], y)
    for key in args.profile:
        name, opt, *rest = key.split(".")  # NAME.OPT or NAME.OPT.rematPCT
        if name in inputs and time.time() < deadline - 90:
            results.setdefault("profiles", {})[key] = profile_one(
                bin_dir, name, opt, inputs, env, out, say,
                suffix + "".join("." + r for r in rest))
            save()
    phase("profiles_done_s")
    # ResNet-50 last: its step was the slow one in the first device call. Each program
    # under a budget (prepare --budget-fractions) right after its unconstrained one.
    runs = [(name, opt, variant)
            for name in sorted(args.configs, key=lambda n: BENCH[n][0] == "resnet50")
            for opt in args.optimizers for variant in variants]
    for name, opt, variant in ([] if args.skip_memopt else runs):
        model = BENCH[name][0]
        key = f"{name}.{opt}{variant}"
        exe = os.path.join(bin_dir, f"{name}.{opt}{suffix}{variant}.cuda")
        if not os.path.exists(exe):
            results["memopt"][key] = {"error": "no executable"}
            continue
        if time.time() > deadline - 60:
            results["memopt"][key] = {"error": "deadline"}
            continue
        earlier = [results["memopt"].get(f"{name}.{o}{variant}", {})
                   for o in args.optimizers]
        if any(e.get("exit") == -1 for e in earlier):
            results["memopt"][key] = {"error": "skipped: the other optimizer's run of this "
                                      "model did not finish in its time limit"}
            continue
        command = [exe, "--random-weights", str(SEED), "--input",
                   f"{input_name(model)}={inputs[name][0]}", "--input",
                   f"labels={inputs[name][1]}", "--steps", "0", "--bench", str(args.runs)]
        limit = min(args.memopt_timeout_s.get(model, 60), deadline - time.time() - 30)
        begin = time.time()
        code, text, stamps = run_streamed(command, limit, env)
        entry = {"wall_s": round(time.time() - begin, 1), "exit": code}
        # Wall-clock time between consecutive step lines (a fallback when --bench does not
        # finish; includes the loss print).
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        if gaps:
            entry["step_wall_ms"] = [round(g * 1000, 1) for g in gaps]
            entry["step_wall_median_ms"] = round(statistics.median(gaps) * 1000, 1)
            entry["steps_done"] = len(stamps)
        if code == 0:
            entry.update(parse_bench(text))
            say(f"memopt {key}: {entry.get('median_ms', float('nan')):.2f} ms, total "
                f"{entry.get('total_bytes', 0) / 2**20:.0f} MiB, beyond state "
                f"{entry.get('beyond_state_bytes', 0) / 2**20:.0f} MiB, device peak "
                f"{entry.get('device_peak_used_bytes', 0) / 2**20:.0f} MiB, loss "
                f"{entry.get('first_loss')} -> {entry.get('last_loss')}")
        else:
            entry["error"] = text[-3000:]
            say(f"memopt {key}: FAILED exit {code}\n{text[-2000:]}")
        results["memopt"][key] = entry
        save()
    phase("memopt_done_s")

    # The warm-ups ran beside the memopt runs (compiling on the CPU; see the doc).
    for name, proc, log in warm:
        try:
            proc.wait(timeout=max(5.0, begin_all + args.warm_cap_s - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            say(f"warm-up {name}: stopped at the cap")
        log.close()
        results.setdefault("warm", {})[name] = open(
            os.path.join(work, f"warm_{name}.log")).read()[-1500:]
    phase("warm_done_s")

    # Phase B2: PyTorch, one child process per model and TF32 setting.
    # One child process for the eager modes and torch.compile without a budget, one per
    # activation budget (each a fresh torch.compile with its own functorch config).
    for key in (held.keys if held is not None else []):
        name, rest = key.split(".", 1)
        run_key = ".".join(rest.rsplit(".", 1))  # MODE.OPT, as torch-one names its runs
        held.release(key, deadline - 5)
        part = held.path(key, ".json")
        part_result = json.load(open(part)) if os.path.exists(part) else {}
        merged = results["torch"].setdefault(f"{name}.tf32={args.tf32[0]}", {"runs": {}})
        for field, value in part_result.items():
            if field != "runs":
                merged.setdefault(field, value)
        merged["runs"][run_key] = entry = part_result.get("runs", {}).get(
            run_key, {"error": "not measured (its log: torch_held/" + key + ".log)"})
        say(f"torch {name} {run_key}: " + (
            f"{entry['median_ms']:.2f} ms, peak {entry['peak_allocated_bytes'] / 2**20:.0f} "
            f"MiB" if "median_ms" in entry else str(entry.get("error"))[:300]))
        save()
    if not args.skip_torch and held is None:
        for tf32 in args.tf32:
            modes = (args.modes if tf32 == args.tf32[0] or args.tf32_compile
                     else [m for m in args.modes if not m.startswith("compile")])
            groups = [[m for m in modes if not m.startswith("compile-budget")]] + \
                [[m] for m in modes if m.startswith("compile-budget")]
            for name, group in [(n, g) for n in args.configs for g in groups if g]:
                entry_key = f"{name}.tf32={tf32}"
                remaining = deadline - time.time()
                if remaining < 40:
                    results["torch"].setdefault(entry_key, {"runs": {}})["runs"].update(
                        {f"{m}.{o}": {"error": "deadline"} for m in group
                         for o in args.optimizers})
                    continue
                part = os.path.join(work, f"torch_{name}_{tf32}_{'_'.join(group)}.json")
                if os.path.exists(part):
                    os.remove(part)  # an earlier call's result on this machine
                command = [sys.executable, SCRIPT, "torch-one", name,
                           "--out", part, "--runs", str(args.runs), "--tf32", tf32,
                           "--precision", args.precision,
                           "--deadline", str(deadline - 10), "--optimizers", *args.optimizers,
                           "--modes", *group]
                try:
                    subprocess.run(command, env=torch_env, timeout=remaining)
                except subprocess.TimeoutExpired:
                    say(f"torch {name} tf32={tf32} {group}: killed at the deadline")
                if os.path.exists(part):
                    part_result = json.load(open(part))
                    merged = results["torch"].setdefault(entry_key, {"runs": {}})
                    for field, value in part_result.items():
                        if field != "runs":
                            merged.setdefault(field, value)
                    merged.setdefault("runs", {}).update(part_result.get("runs", {}))
                    for key, entry in part_result.get("runs", {}).items():
                        if "median_ms" in entry:
                            say(f"torch {name} {key} tf32={tf32}: {entry['median_ms']:.2f} ms, "
                                f"peak {entry['peak_allocated_bytes'] / 2**20:.0f} MiB, beyond "
                                f"state {entry['beyond_state_bytes'] / 2**20:.0f} MiB")
                        else:
                            say(f"torch {name} {key} tf32={tf32}: {entry.get('error')}")
                save()
    phase("total_s")
    print_table(results)
    return 0


def print_table(results):
    print("\n| config | optimizer | memopt ms | eager ms | compile ms | memopt total MiB | "
          "eager peak MiB | compile peak MiB | memopt beyond state | eager beyond | "
          "compile beyond |")
    for key, m in results.get("memopt", {}).items():
        name, opt = key.split(".")[:2]  # NAME.OPT[.rematPCT]
        torch_runs = results.get("torch", {})
        t = next((torch_runs[f"{name}.tf32={v}"].get("runs", {}) for v in
                  ("off", "default", "on") if f"{name}.tf32={v}" in torch_runs), {})
        e, c = t.get(f"eager.{opt}", {}), t.get(f"compile.{opt}", {})

        def ms(r):
            return f"{r['median_ms']:.1f}" if "median_ms" in r else "-"

        def mb(r, k):
            return f"{r[k] / 2**20:.0f}" if k in r else "-"

        label = name + key[len(name) + 1 + len(opt):]  # NAME[.rematPCT]
        print(f"| {label} | {opt} | {ms(m)} | {ms(e)} | {ms(c)} | {mb(m, 'total_bytes')} | "
              f"{mb(e, 'peak_allocated_bytes')} | {mb(c, 'peak_allocated_bytes')} | "
              f"{mb(m, 'beyond_state_bytes')} | {mb(e, 'beyond_state_bytes')} | "
              f"{mb(c, 'beyond_state_bytes')} |")
    for name, check in results.get("checks", {}).items():
        worst = check.get("worst") or {}
        print(f"check {name}: worst rel L2 {worst.get('rel_l2')} ({worst.get('name')}), "
              f"loss rel {check.get('loss_rel')}")
    if "gpu_check" in results:
        print(f"gpu_check: {results['gpu_check']}")


# ----------------------------------------------------------------------------------------------
# PyTorch side (a child process per model)


def checkpoint_blocks(module, model):
    """Mode `checkpoint` (issue 17's baseline): torch.utils.checkpoint with
    use_reentrant=False around each block, so that only block inputs are saved and each
    block's forward runs again in the backward. ResNet-50: each Bottleneck of layer1-4 (16);
    ViT: each encoder layer (12); GPT-2 and Llama: each decoder block through transformers' own
    switch (gradient_checkpointing_enable), wrapped by hand if that fails. Returns the blocks wrapped.
    (BatchNorm's running statistics are updated again when a block is recomputed, as always
    with torch.utils.checkpoint; the batch statistics and gradients are unchanged.)"""
    import torch
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(torch.nn.Module):
        def __init__(self, block):
            super().__init__()
            self.block = block

        def forward(self, *args, **kwargs):
            return checkpoint(self.block, *args, use_reentrant=False, **kwargs)

    if model in ("gpt2", "gpt2_tiny", "gpt2_medium", "llama_1b", "llama_7b"):
        inner = module.inner
        blocks = inner.transformer.h if model.startswith("gpt2") else inner.model.layers
        try:
            inner.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False})
            if getattr(inner, "is_gradient_checkpointing", True):
                return len(blocks)
        except Exception as error:  # noqa: BLE001 - fall back to wrapping the blocks
            print(f"gradient_checkpointing_enable failed ({error}); wrapping the blocks",
                  flush=True)
        containers = [blocks]
    elif model == "resnet50":
        containers = [module.layer1, module.layer2, module.layer3, module.layer4]
    elif model in ("vit_b_16", "vit_tiny"):
        containers = [module.encoder.layers]
    else:
        raise ValueError(f"no checkpoint blocks known for {model}")
    count = 0
    for container in containers:
        for i in range(len(container)):
            container[i] = Checkpointed(container[i])
            count += 1
    return count


def cmd_torch_one(args):
    import gc

    import numpy as np  # noqa: F401
    import torch
    import torch.nn.functional as F

    import gpu_bench

    if args.hold and (len(args.modes) != 1 or len(args.optimizers) != 1):
        raise SystemExit("torch-one --hold: one mode and one optimizer per process (each "
                         "step's peak memory is measured with nothing else resident)")
    on = args.tf32 == "on"
    if args.tf32 != "default":  # "default": PyTorch's own (cuDNN TF32 on, matmul TF32 off)
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on
        torch.set_float32_matmul_precision("high" if on else "highest")
    torch.backends.cudnn.benchmark = True
    torch._dynamo.config.cache_size_limit = 64
    model, batch, size, classes = BENCH[args.name]
    x_host, y_host = (torch.from_numpy(a) for a in make_batch(model, batch, size, classes))
    result = {"environment": gpu_bench.torch_environment(),
              "tf32": args.tf32 if args.tf32 == "default" else on, "runs": {},
              "precision": args.precision,
              "tf32_flags": {"matmul": torch.backends.cuda.matmul.allow_tf32,
                             "cudnn": torch.backends.cudnn.allow_tf32,
                             "float32_matmul_precision":
                                 torch.get_float32_matmul_precision()}}
    # Mixed precision: autocast (and a GradScaler with its defaults for fp16), channels-last
    # for the convolutional net, as PyTorch's AMP recipe has it.
    low = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    channels_last = low is not None and model == "resnet50"
    if channels_last:
        x_host = x_host.contiguous(memory_format=torch.channels_last)

    def save():
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1)

    def state_bytes(module, opt):
        params = sum(p.numel() * p.element_size() for p in module.parameters())
        buffers = sum(b.numel() * b.element_size() for b in module.buffers())
        opt_state = sum(v.numel() * v.element_size() for s in opt.state.values()
                        for v in s.values() if torch.is_tensor(v) and v.is_cuda)
        return params, buffers, opt_state

    for mode in args.modes:
        # One module and one compiled forward + loss per mode, shared by the optimizers.
        torch._dynamo.reset()
        # torch.compile's activation-memory budget (the min-cut partitioner recomputes until
        # the saved activations fit the fraction): the "with budget 0.5" baseline.
        import torch._functorch.config as functorch_config

        # "compile-budget=B": budget B (one child process per budget, see cmd_device);
        # plain "compile-budget": --activation-budget.
        budget = None
        if mode.startswith("compile-budget"):
            budget = float(mode.split("=", 1)[1]) if "=" in mode else args.activation_budget
        functorch_config.activation_memory_budget = 1.0 if budget is None else budget
        module = build_module(model, size, classes).cuda().train()
        if channels_last:
            module = module.to(memory_format=torch.channels_last)
        blocks = checkpoint_blocks(module, model) if mode == "checkpoint" else 0

        def plain_loss(x, y):
            with torch.autocast("cuda", dtype=low, enabled=low is not None):
                logits = module(x)
                return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

        loss_fn = (torch.compile(plain_loss, dynamic=False) if mode.startswith("compile")
                   else plain_loss)
        for opt_name in args.optimizers:
            key = f"{mode}.{opt_name}"
            if time.time() > args.deadline:
                result["runs"][key] = {"error": "deadline"}
                continue
            try:
                module.zero_grad(set_to_none=True)
                if opt_name == "sgd":
                    opt = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)
                else:
                    # fused: one multi-tensor kernel, as PyTorch users run AdamW at its best
                    opt = torch.optim.AdamW(module.parameters(), lr=1e-4, weight_decay=0.01,
                                            fused=True)
                opt_step = opt.step
                if mode.startswith("compile") and args.compile_optimizer:
                    opt_step = torch.compile(opt.step, dynamic=False)
                scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")

                def step():
                    x = x_host.to("cuda")
                    y = y_host.to("cuda")
                    loss = loss_fn(x, y)
                    scaler.scale(loss).backward()
                    if scaler.is_enabled():
                        scaler.step(opt)  # syncs the host to read found_inf (unfused SGD)
                        scaler.update()
                    else:
                        opt_step()
                    opt.zero_grad(set_to_none=True)
                    return loss

                begin = time.time()
                first_loss = float(step())
                torch.cuda.synchronize()
                first_s = time.time() - begin
                if args.warm_only:
                    step()
                    torch.cuda.synchronize()
                    result["runs"][key] = {"warm_s": round(time.time() - begin, 1)}
                    print(f"warm {args.name} {key}: {time.time() - begin:.1f} s", flush=True)
                    save()
                    del opt, opt_step
                    gc.collect()
                    torch.cuda.empty_cache()
                    continue
                if args.hold:
                    # Compiled: idle until the parent says go (gpu_bench.HeldProcesses), the
                    # GPU being memopt's meanwhile; then measured as without --hold.
                    torch.cuda.synchronize()
                    gc.collect()
                    torch.cuda.empty_cache()
                    save()
                    print(f"{args.name} {key}: first step in {first_s:.1f} s, held",
                          flush=True)
                    open(args.hold + ".ready", "w").close()
                    while not os.path.exists(args.hold + ".go"):
                        time.sleep(0.2)
                for _ in range(4):
                    step()
                torch.cuda.synchronize()
                gc.collect()
                torch.cuda.reset_peak_memory_stats()
                resident = torch.cuda.memory_allocated()
                step()
                torch.cuda.synchronize()
                peak = torch.cuda.max_memory_allocated()
                peak_reserved = torch.cuda.max_memory_reserved()
                free, total = torch.cuda.mem_get_info()
                params, buffers, opt_state = state_bytes(module, opt)
                start = torch.cuda.Event(enable_timing=True)
                stop = torch.cuda.Event(enable_timing=True)
                times = []
                for _ in range(args.runs):
                    start.record()
                    loss = step()
                    stop.record()
                    stop.synchronize()
                    times.append(start.elapsed_time(stop))
                state = params + buffers + params + opt_state  # + gradients (= parameters)
                result["runs"][key] = {
                    "median_ms": statistics.median(times), "min_ms": min(times),
                    "max_ms": max(times), "runs": args.runs, "first_step_s": round(first_s, 1),
                    "peak_allocated_bytes": peak, "peak_reserved_bytes": peak_reserved,
                    "resident_between_steps_bytes": resident,
                    "device_used_bytes": total - free, "param_bytes": params,
                    "buffer_bytes": buffers, "grad_bytes": params,
                    "optimizer_state_bytes": opt_state, "state_bytes": state,
                    "beyond_state_bytes": peak - state, "first_loss": first_loss,
                    "last_loss": float(loss), "precision": args.precision,
                    "channels_last": channels_last, "activation_memory_budget": budget,
                    "checkpointed_blocks": blocks,
                    "loss_scale": float(scaler.get_scale()) if scaler.is_enabled() else None}
                print(f"{args.name} {key} tf32={args.tf32}: "
                      f"{result['runs'][key]['median_ms']:.2f} ms, "
                      f"peak {peak / 2**20:.0f} MiB", flush=True)
                del opt, opt_step
            except Exception as error:  # noqa: BLE001 - recorded per run
                result["runs"][key] = {"error": f"{type(error).__name__}: {str(error)[:2000]}"}
                print(f"{args.name} {key}: FAILED {str(error)[:500]}", flush=True)
            gc.collect()
            torch.cuda.empty_cache()
            save()
        del module, loss_fn
        gc.collect()
        torch.cuda.empty_cache()
    save()
    return 0
