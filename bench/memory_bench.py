#!/usr/bin/env python3
"""Memory-planning benchmark over the model zoo.

For every model in python/models/zoo.py (weights filled deterministically), runs the memory
passes (after attention fusion, as memopt-compile does) and prints a markdown table: naive
bytes, max-live before and after scheduling, the planned arena and its ratio to max-live, bytes
saved in place, and plan time. Writes the table to .dev-bench/memory/raw/memory.md (or
--output), which `python3 bench/run.py report --suite memory --raw .dev-bench/memory/raw`
records.

    python3 bench/memory_bench.py [--build build] [--models resnet50,bert_nn] [--batch 1]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python", "models"))

import fill_weights  # noqa: E402
import zoo  # noqa: E402


def mib(n):
    return f"{n / 2**20:.2f}"


def run_model(model, build, workdir, batch):
    dest = os.path.join(workdir, model.exporter, model.name)
    os.makedirs(dest, exist_ok=True)
    fill_weights.fill(model.path, dest, log=open(os.devnull, "w"))
    onnx_path = os.path.join(dest, os.path.basename(model.path))
    shape_args = []
    for name, (shape, _) in model.inputs.items():
        dims = (batch,) + tuple(shape[1:])
        shape_args += ["--input-shape", f"{name}={'x'.join(map(str, dims))}"]
    report = os.path.join(dest, "memory.json")
    start = time.perf_counter()
    imported = subprocess.run(
        [os.path.join(build, "bin", "memopt-translate"), "--import-onnx", onnx_path,
         ] + shape_args,
        capture_output=True)
    if imported.returncode != 0:
        return {"model": model.id, "error": imported.stderr.decode().strip().splitlines()[0]}
    import_seconds = time.perf_counter() - start
    start = time.perf_counter()
    planned = subprocess.run(
        [os.path.join(build, "bin", "memopt-opt"), "--canonicalize",
         "--memopt-fuse-attention", "--memopt-fuse-epilogues", "--memopt-fuse-elementwise",
         "--memopt-schedule=report",
         "--memopt-bufferize", f"--memopt-plan-memory=report={report}",
         "-o", os.devnull],
        input=imported.stdout, capture_output=True)
    if planned.returncode != 0:
        return {"model": model.id, "error": planned.stderr.decode().strip().splitlines()[0]}
    passes_seconds = time.perf_counter() - start
    match = re.search(rb"max-live before (\d+), after (\d+) \((\S+)\)", planned.stdout)
    data = json.load(open(report))
    return {
        "model": model.id,
        "ops": data["num_ops"],
        "naive": data["naive_bytes"],
        "before": int(match.group(1)),
        "after": int(match.group(2)),
        "scheduler": match.group(3).decode(),
        "arena": data["arena_bytes"],
        "inplace": data["inplace_saved_bytes"],
        "plan_seconds": data["plan_seconds"],
        "algorithm": data["plan_algorithm"],
        "import_seconds": import_seconds,
        "passes_seconds": passes_seconds,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--output", default=os.path.join(REPO, ".dev-bench", "memory", "raw",
                                                              "memory.md"))
    args = parser.parse_args()
    wanted = set(filter(None, args.models.split(",")))
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for model in zoo.MODELS:
            if wanted and model.name not in wanted:
                continue
            rows.append(run_model(model, args.build, workdir, args.batch))
            print(rows[-1], file=sys.stderr)
    lines = [
        f"Batch {args.batch}. Bytes in MiB. `python3 bench/memory_bench.py --batch {args.batch}`",
        "",
        "naive: every arena tensor its own slot; max-live: the most arena bytes alive at once "
        "(the lower bound), in the imported order and after --memopt-schedule; arena: the "
        "planned size; in-place saved: bytes --memopt-bufferize removed; plan ms: the packing "
        "(planner + validator); passes s: canonicalize + fuse-attention + fuse-epilogues + "
        "fuse-elementwise + schedule + bufferize + plan, wall; inputs and outputs are the caller's buffers here "
        "(memopt-compile also plans outputs in the arena); "
        "import s: memopt-translate, wall.",
        "",
        "| model | ops | naive | max-live before sched. | max-live after | arena | arena / max-live "
        "| in-place saved | plan ms | passes s | import s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} ||||||||||")
            continue
        lines.append(
            f"| {r['model']} | {r['ops']} | {mib(r['naive'])} | {mib(r['before'])} | "
            f"{mib(r['after'])} | {mib(r['arena'])} | {r['arena'] / max(r['after'], 1):.4f} | "
            f"{mib(r['inplace'])} | {1000 * r['plan_seconds']:.1f} | {r['passes_seconds']:.2f} | "
            f"{r['import_seconds']:.2f} |")
    table = "\n".join(lines)
    print(table)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        f.write(table + "\n")


if __name__ == "__main__":
    main()
