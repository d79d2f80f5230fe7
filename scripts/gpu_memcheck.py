#!/usr/bin/env python3
"""CUDA programs under compute-sanitizer's memcheck (issue 13, "runtime inputs": the GPU check
runs the bench programs under compute-sanitizer memcheck once).

memopt-compile needs MLIR (this machine), the GPU is on the device machine, so in two steps:

  prepare (here)    compiles the programs with `memopt-compile --target cuda --emit source` into
                    DEST (inference at the zoo's batch for the GPU bench's five models, and
                    training steps of three of them), writes their inputs as .npy, and puts the
                    runtime's sources at HEAD beside them (git archive)
  device  (GPU)     builds the runtime standalone and every program with nvcc, runs the CUDA
                    kernel suite and every program (one inference run, or two training steps)
                    under `compute-sanitizer --tool memcheck`, and writes memcheck.json +
                    one log per program into OUT

    python3 scripts/gpu_memcheck.py prepare --dest /work/main/.dev-memcheck
    # device (carry=[".dev-memcheck"]):
    #   python3 .dev-memcheck/gpu_memcheck.py device --carry .dev-memcheck --out $OUT

A program passes when compute-sanitizer reports 0 errors and the program exits 0. memcheck
makes every kernel much slower, which is why the programs run once at small batches (the
kernels and the generated program are the same as at the bench's batch; only sizes differ).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python", "models"))

# (name, zoo id, extra memopt-compile flags, training?)
PROGRAMS = [
    ("resnet50", "dynamo/resnet50", [], False),
    ("mobilenet_v3_large", "dynamo/mobilenet_v3_large", [], False),
    ("vit_b_16", "dynamo/vit_b_16", [], False),
    ("hf_bert", "dynamo/hf_bert", [], False),
    ("hf_gpt2", "dynamo/hf_gpt2", [], False),
    ("tiny_convnet.train", "bundled/tiny_convnet",
     ["--train", "--bn-batch-stats", "--momentum", "0.9"], True),
    ("resnet50.train", "dynamo/resnet50",
     ["--train", "--bn-batch-stats", "--optimizer", "adamw"], True),
    ("gpt2_nn.train", "dynamo/gpt2_nn", ["--train", "--momentum", "0.9"], True),
]


def zoo_model(model_id):
    import zoo
    return zoo.BUNDLED if model_id == "bundled/tiny_convnet" else zoo.by_id(model_id)


def cmd_prepare(args):
    import fill_weights
    import numpy as np
    compile_tool = os.path.join(args.build, "bin", "memopt-compile")
    os.makedirs(args.dest, exist_ok=True)
    src = os.path.join(args.dest, "src")
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    subprocess.run(f"git archive HEAD lib/Runtime include unittests/Runtime test/GPU scripts | "
                   f"tar -x -C {src}", shell=True, cwd=REPO, check=True)
    shutil.copy(os.path.abspath(__file__), args.dest)
    manifest = []
    for name, model_id, flags, training in PROGRAMS:
        model = zoo_model(model_id)
        folder = os.path.join(args.dest, name)
        os.makedirs(folder, exist_ok=True)
        if model_id == "bundled/tiny_convnet":
            path = os.path.join(REPO, "models", "tiny_convnet.onnx")
        else:  # the zoo's graphs carry no weights: deterministic ones, here only
            path = fill_weights.fill(model.path, os.path.join(args.work, name),
                                     log=open(os.devnull, "w"))
        shape_args = model.input_shape_args() if model_id != "bundled/tiny_convnet" else []
        command = [compile_tool, path, *shape_args, *flags, "--target", "cuda", "--arch",
                   "sm_90", "--emit", "source", "-o", os.path.join(folder, "program"),
                   "--quiet"]
        subprocess.run(command, check=True)
        os.remove(os.path.join(folder, "program.weights"))  # --random-weights there
        template = os.path.join(folder, "program.onnx-template")
        if os.path.exists(template):
            os.remove(template)
        rng = np.random.default_rng(3)
        inputs = []
        for input_name, (shape, dtype) in model.inputs.items():
            if input_name in model.values:
                value = model.values[input_name](shape)
            elif dtype == "int64":
                value = rng.integers(0, 1000, shape)
            else:
                value = rng.standard_normal(shape)
            np.save(os.path.join(folder, f"{input_name}.npy"), value.astype(dtype))
            inputs.append(input_name)
        if training:
            batch = next(iter(model.inputs.values()))[0]
            labels = rng.integers(0, 10 if "tiny" in name else 1000,
                                  batch[:1] if model.family == "vision" else batch[:2])
            np.save(os.path.join(folder, "labels.npy"), labels.astype(np.int64))
            inputs.append("labels")
        manifest.append({"name": name, "model": model_id, "flags": flags,
                         "training": training, "inputs": inputs})
        print(f"prepared {name}", flush=True)
    with open(os.path.join(args.dest, "manifest.json"), "w") as handle:
        json.dump(manifest, handle, indent=1)


def library_path():
    """cuDNN and cuBLAS from PyTorch's wheels, then the toolkit's."""
    paths = []
    for module in ("nvidia.cudnn", "nvidia.cublas", "nvidia.cu13"):
        try:
            base = list(__import__(module, fromlist=["x"]).__path__)[0]
            paths.append(os.path.join(base, "lib"))
        except Exception:  # noqa: BLE001 - optional wheels
            pass
    paths.append("/usr/local/cuda/lib64")
    return ":".join(p for p in paths if os.path.isdir(p))


def memcheck(command, log_path, env, timeout):
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    full = [sanitizer, "--tool", "memcheck", "--leak-check", "no", "--error-exitcode", "99",
            *command]
    start = time.time()
    try:
        result = subprocess.run(full, capture_output=True, text=True, env=env, timeout=timeout)
        text, code = result.stdout + result.stderr, result.returncode
    except subprocess.TimeoutExpired as expired:
        text = (expired.stdout or b"").decode(errors="replace") if isinstance(
            expired.stdout, bytes) else (expired.stdout or "")
        code = "timeout"
    with open(log_path, "w") as handle:
        handle.write(" ".join(full) + "\n" + text)
    summary = [line for line in text.splitlines() if "ERROR SUMMARY" in line]
    return {"exit": code, "seconds": round(time.time() - start, 1),
            "summary": summary[-1].strip("= ").strip() if summary else None}


def cmd_device(args):
    started = time.time()
    carry = os.path.abspath(args.carry)
    src = os.path.join(carry, "src")
    work = args.work
    os.makedirs(work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = library_path() + ":" + env.get("LD_LIBRARY_PATH", "")
    results = {}

    def save():
        with open(os.path.join(args.out, "memcheck.json"), "w") as handle:
            json.dump(results, handle, indent=1)

    # The runtime and the kernel suite, built as scripts/gpu_check.sh builds them.
    runtime = os.path.join(work, "runtime")
    check = subprocess.run(f"SKIP_PERF=1 SKIP_EXAMPLE=1 CUDA_ARCH=90 bash {src}/scripts/"
                           f"gpu_check.sh {runtime}", shell=True, capture_output=True, text=True,
                           env=env)
    with open(os.path.join(args.out, "gpu_check.log"), "w") as handle:
        handle.write(check.stdout + check.stderr)
    results["gpu_check"] = {"exit": check.returncode}
    suite_out = os.path.join(work, "suite")
    os.makedirs(suite_out, exist_ok=True)
    results["kernel_suite"] = memcheck(
        [os.path.join(runtime, "memopt-kernel-suite-cuda"), "--out", suite_out],
        os.path.join(args.out, "kernel_suite.log"), env, args.timeout)
    print("kernel suite:", results["kernel_suite"], flush=True)
    save()

    manifest = json.load(open(os.path.join(carry, "manifest.json")))
    # The runtime's program libraries once; the programs' build scripts then find them built
    # (their own cmake calls would race on one build folder, so a no-op cmake stands in).
    subprocess.run(f"cmake --build {runtime} -j 16 --target memopt_runtime_main "
                   f"memopt_runtime_capi memopt_runtime_driver memopt_runtime_cuda",
                   shell=True, check=True, env=env)
    shim = os.path.join(work, "shim")
    os.makedirs(shim, exist_ok=True)
    with open(os.path.join(shim, "cmake"), "w") as handle:
        handle.write("#!/bin/sh\nexit 0\n")
    os.chmod(os.path.join(shim, "cmake"), 0o755)
    build_env = dict(env, PATH=shim + ":" + env["PATH"])
    jobs = []
    for entry in manifest:
        folder = os.path.join(carry, entry["name"])
        jobs.append(subprocess.Popen(
            f"MEMOPT_ROOT={src} MEMOPT_RUNTIME_BUILD={runtime} sh {folder}/program.build.sh",
            shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=build_env))
    for entry, job in zip(manifest, jobs):
        output = job.communicate()[0]
        if job.returncode != 0:
            results[entry["name"]] = {"exit": "build failed", "log": output[-2000:]}
    save()
    for entry in manifest:
        name = entry["name"]
        if name in results:
            continue
        left = args.deadline_s - (time.time() - started)
        if left < 30:
            results[name] = {"exit": "not run (deadline)"}
            continue
        folder = os.path.join(carry, name)
        command = [os.path.join(folder, "program"), "--random-weights", "1"]
        for input_name in entry["inputs"]:
            command += ["--input", f"{input_name}={os.path.join(folder, input_name + '.npy')}"]
        if entry["training"]:
            command += ["--steps", "2"]
        else:
            out_dir = os.path.join(work, name + ".outputs")
            os.makedirs(out_dir, exist_ok=True)
            command += ["--output-dir", out_dir]
        results[name] = memcheck(command, os.path.join(args.out, name + ".log"), env,
                                 min(args.timeout, left - 10))
        print(name, results[name], flush=True)
        save()
    clean = all(r.get("exit") == 0 for key, r in results.items() if key != "gpu_check")
    print("MEMCHECK CLEAN" if clean else "MEMCHECK FOUND PROBLEMS", flush=True)
    return 0 if clean else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--dest", required=True)
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--work", default="/tmp/memcheck-prepare")
    p = sub.add_parser("device")
    p.add_argument("--carry", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/memcheck")
    p.add_argument("--timeout", type=float, default=150, help="seconds per program")
    p.add_argument("--deadline-s", type=float, default=560, help="for the whole step")
    args = parser.parse_args()
    return cmd_prepare(args) if args.command == "prepare" else cmd_device(args)


if __name__ == "__main__":
    sys.exit(main())
