#!/usr/bin/env python3
"""Mixed-precision benchmark over the bundled model and the model zoo.

For every model (weights filled deterministically by python/models/fill_weights.py), compiles
with `memopt-compile --precision fp32|fp16|bf16 --report FILE.json` and tabulates the weight
region and the planned arena of each precision (from the report JSON). With --run it also builds
the host executables, runs them on the inputs python/tests use (seed 0: floats of magnitude
0.5..1.5 with random signs, token ids 1..99) and gives each precision's largest error against
onnxruntime in float32: max |memopt - onnxruntime| / max |onnxruntime| over every float output.
Writes the table to .dev-bench/precision/raw/precision.md (or --output; `bench/run.py report
--suite precision` records it).

    python3 bench/precision_bench.py [--build build] [--models resnet50,bert_nn] [--run]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python", "models"))

import fill_weights  # noqa: E402
import zoo  # noqa: E402

PRECISIONS = ("fp32", "fp16", "bf16")


def mib(n):
    return f"{n / 2**20:.2f}"


def random_inputs(session, shapes, seed=0):
    """The inputs of python/tests/test_e2e_host.py::random_inputs."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for info in session.get_inputs():
        shape = shapes.get(info.name) or [d if isinstance(d, int) else 1 for d in info.shape]
        if info.type == "tensor(int64)":
            inputs[info.name] = rng.integers(1, 100, size=shape, dtype=np.int64)
        else:
            magnitude = rng.uniform(0.5, 1.5, size=shape)
            sign = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
            inputs[info.name] = (magnitude * sign).astype(np.float32)
    return inputs


def output_file(name):
    return "".join("_" if c in "/\\: " else c for c in name) + ".npy"


def run_model(model, build, workdir, run):
    dest = os.path.join(workdir, model.exporter, model.name)
    os.makedirs(dest, exist_ok=True)
    if model is zoo.BUNDLED:
        onnx_path = zoo.BUNDLED_PATH
    else:
        onnx_path = fill_weights.fill(model.path, dest, log=open(os.devnull, "w"))
    shapes = {name: shape for name, (shape, _) in model.inputs.items()}
    shape_args = []
    for name, shape in shapes.items():
        shape_args += ["--input-shape", f"{name}={'x'.join(map(str, shape))}"]
    row = {"model": model.id}
    expected = inputs = None
    if run:
        import onnxruntime as ort
        session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        inputs = random_inputs(session, shapes)
        expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs)))
    for precision in PRECISIONS:
        out = os.path.join(dest, precision)
        os.makedirs(out, exist_ok=True)
        exe = os.path.join(out, "model")
        report = os.path.join(out, "memory.json")
        argv = [os.path.join(build, "bin", "memopt-compile"), onnx_path, "-o",
                exe if run else os.path.join(out, "plan.mlir"), "--target", "host",
                "--precision", precision, "--report", report, "--quiet", *shape_args]
        if not run:
            argv += ["--emit", "plan"]
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            message = proc.stderr.strip().splitlines()[0]
            return {"model": model.id, "error": message.split("error: ", 1)[-1]}
        row[f"{precision}_compile_s"] = time.perf_counter() - start
        data = json.load(open(report))
        row[f"{precision}_weights"] = data["weights_bytes"]
        row[f"{precision}_arena"] = data["arena_bytes"]
        if not run:
            continue
        argv = [exe, "--weights", exe + ".weights", "--output-dir", out]
        for name, value in inputs.items():
            path = os.path.join(out, "in_" + output_file(name))
            np.save(path, value)
            argv += ["--input", f"{name}={path}"]
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            return {"model": model.id, "error": f"{precision} run: {proc.stderr.strip()[-300:]}"}
        row[f"{precision}_run_s"] = time.perf_counter() - start
        error = 0.0
        for name, reference in expected.items():
            if reference.dtype.kind != "f":
                continue
            got = np.load(os.path.join(out, output_file(name))).astype(np.float64)
            scale = float(np.max(np.abs(reference)))
            error = max(error, float(np.max(np.abs(got - reference))) / scale)
        row[f"{precision}_error"] = error
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--models", default="",
                        help="comma-separated model ids or names (default: all)")
    parser.add_argument("--run", action="store_true",
                        help="also build, run on the host and compare with onnxruntime")
    parser.add_argument("--output", default=os.path.join(REPO, ".dev-bench",
                                                         "precision", "raw", "precision.md"))
    args = parser.parse_args()
    wanted = set(filter(None, args.models.split(",")))
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for model in [zoo.BUNDLED] + zoo.MODELS:
            if wanted and model.name not in wanted and model.id not in wanted:
                continue
            rows.append(run_model(model, args.build, workdir, args.run))
            print(rows[-1], file=sys.stderr, flush=True)
    command = "python3 bench/precision_bench.py" + (" --run" if args.run else "")
    lines = [
        f"Weights and planned arena in MiB per precision; f16/bf16 columns give the ratio to "
        f"fp32. `{command}`",
        "",
        "| model | weights fp32 | weights fp16 | weights bf16 | arena fp32 | arena fp16 | "
        "arena bf16 |" + (" max rel. error fp32 | fp16 | bf16 |" if args.run else ""),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: | ---: |"
                                                          if args.run else ""),
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} |||||||")
            continue
        cells = [r["model"]]
        for kind in ("weights", "arena"):
            base = r[f"fp32_{kind}"]
            cells.append(mib(base))
            for precision in ("fp16", "bf16"):
                value = r[f"{precision}_{kind}"]
                cells.append(f"{mib(value)} ({value / max(base, 1):.2f})")
        if args.run:
            cells += [f"{r[f'{p}_error']:.2e}" for p in PRECISIONS]
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        f.write(table + "\n")


if __name__ == "__main__":
    main()
