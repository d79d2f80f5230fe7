#!/usr/bin/env python3
"""Rematerialization sweep: arena against added compute, per model (issue 17, part 4).

For each zoo model (python/models/zoo.py; default: the TorchScript foundation set) and each
mode (inference, and the training step of `memopt-compile --train`), at batch 1 on the host:

1. compiles and runs the program without a budget (the unconstrained arena A0);
2. compiles with `--memory-budget` at falling fractions of A0 (0.9, 0.8, ...) until a budget
   fails; then at two budgets between the last fit and the smallest arena the failure message
   reports, and at that smallest arena (the smallest feasible budget found);
3. checks every point: the planned arena is within its budget, and the program's numbers on
   the host backend are those of the unconstrained program (inference: every output;
   training: the loss and, after one SGD-with-momentum step, every parameter and momentum
   buffer, written by --save-state), within RELATIVE_TOLERANCE;
4. writes the points (JSON), a table (markdown) and the Pareto curves (SVG: arena / A0
   against the estimated added step time, one line per model, one panel per mode).

The added time is the memory report's estimate (H100 roofline, lib/Analysis/CostModel.cpp),
not a measurement.

Usage: bench/remat_sweep.py [--models NAME,...] [--exporters torchscript,dynamo]
                            [--modes inference,train] [--fractions 0.9,0.8,...]
                            [--time-limit S] [--json FILE] [--markdown FILE] [--svg FILE]
       bench/remat_sweep.py --replot JSON   (table and picture again from a sweep's points)
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python", "models"))
import zoo  # noqa: E402
from fill_weights import fill  # noqa: E402

FRACTIONS = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1]
# Recomputation runs the same kernels on the same inputs, so the host backend gives the same
# bits (measured: 0 difference on every point so far); this bound only allows for a kernel
# whose reduction order would depend on where its buffers sit.
RELATIVE_TOLERANCE = 1e-6
SMALLEST = re.compile(r"the smallest arena reached(?: \(\d+ ops recomputed\))? is [^(]+\((\d+) bytes\)")


def run(argv, timeout=1800):
    started = time.time()
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout)
    return proc, time.time() - started


def has_batch_norm(path):
    return any(n.op_type == "BatchNormalization"
               for n in onnx.load(path, load_external_data=False).graph.node)


def make_inputs(model, folder, mode):
    """Deterministic inputs (and labels / target for training) as .npy files."""
    rng = np.random.default_rng(7)
    files = {}
    for name, (shape, dtype) in model.inputs.items():
        if name in model.values:
            value = model.values[name](shape)
        elif dtype == "int64":
            value = rng.integers(0, 8192, shape).astype(np.int64)
        else:
            value = rng.standard_normal(shape).astype(np.float32)
        files[name] = os.path.join(folder, f"{name}.npy")
        np.save(files[name], value)
    flags = []
    if mode == "train":
        if model.name == "bert_nn":
            files["target"] = os.path.join(folder, "target.npy")
            np.save(files["target"], rng.standard_normal((1, 256)).astype(np.float32))
            flags = ["--loss", "mse", "--loss-output", "pooled"]
        else:
            shape = (1,) if model.family == "vision" else (1, 128)
            high = 1000 if model.family == "vision" else 8192
            files["labels"] = os.path.join(folder, "labels.npy")
            np.save(files["labels"], rng.integers(0, high, shape).astype(np.int64))
        flags += ["--train", "--momentum", "0.9", "--lr", "0.01"]
    return files, flags


def execute(program, files, mode, folder):
    """Runs a compiled program; returns {name: array} (outputs, or loss and state)."""
    argv = [program]
    for name, path in files.items():
        argv += ["--input", f"{name}={path}"]
    os.makedirs(folder, exist_ok=True)
    if mode == "train":
        argv += ["--steps", "1", "--save-state", folder]
    else:
        argv += ["--output-dir", folder]
    proc, _ = run(argv)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{proc.stdout}\n{proc.stderr}")
    values = {f: np.load(os.path.join(folder, f)) for f in sorted(os.listdir(folder))
              if f.endswith(".npy")}
    if mode == "train":
        losses = re.findall(r"step 1 loss (\S+)", proc.stdout)
        values["loss"] = np.array([float(losses[0])])
    return values


def compare(reference, values):
    """Worst relative L2 difference and max abs difference over all arrays."""
    if sorted(reference) != sorted(values):
        return float("inf"), float("inf")
    worst_rel, worst_abs = 0.0, 0.0
    for name, ref in reference.items():
        got = values[name].astype(np.float64)
        ref = ref.astype(np.float64)
        diff = np.linalg.norm(got - ref)
        norm = np.linalg.norm(ref)
        worst_rel = max(worst_rel, diff / norm if norm > 0 else diff)
        worst_abs = max(worst_abs, float(np.max(np.abs(got - ref))) if got.size else 0.0)
    return worst_rel, worst_abs


def compile_point(compiler, model, path, flags, out, budget, time_limit):
    argv = [compiler, path, "-o", out, "--report", out + ".json", "--quiet",
            "--remat-time-limit", str(time_limit), *model.input_shape_args(), *flags]
    if budget:
        argv += ["--memory-budget", str(budget)]
    return run(argv)


def sweep_one(compiler, model, mode, fractions, time_limit, work):
    folder = os.path.join(work, model.exporter, model.name, mode)
    os.makedirs(folder, exist_ok=True)
    path = fill(model.path, os.path.join(work, model.exporter, model.name, "model"),
                log=open(os.devnull, "w"))
    files, flags = make_inputs(model, folder, mode)
    if mode == "train" and model.family == "vision" and has_batch_norm(path):
        flags.append("--bn-batch-stats")
    base = os.path.join(folder, "base")
    proc, seconds = compile_point(compiler, model, path, flags, base, 0, time_limit)
    if proc.returncode != 0:
        return {"model": model.id, "mode": mode, "error": proc.stderr.strip()[-400:]}
    report = json.load(open(base + ".json"))
    unconstrained = report["arena_bytes"]
    reference = execute(base, files, mode, os.path.join(folder, "base.out"))
    result = {"model": model.id, "mode": mode, "ops": report["num_ops"],
              "unconstrained_arena": unconstrained, "max_live": report["max_live_bytes"],
              "compile_seconds": round(seconds, 1), "points": [], "smallest_failure": None}
    print(f"{model.id} {mode}: unconstrained arena {unconstrained} bytes", file=sys.stderr)

    def point(budget, label):
        out = os.path.join(folder, f"b{budget}")
        proc, seconds = compile_point(compiler, model, path, flags, out, budget, time_limit)
        if proc.returncode != 0:
            message = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
            match = SMALLEST.search(message)
            return None, (int(match.group(1)) if match else None), message
        data = json.load(open(out + ".json"))
        remat = data.get("remat", {})
        try:
            values = execute(out, files, mode, out + ".out")
        finally:
            # A point's program, weights and state can be hundreds of MiB.
            for suffix in ("", ".weights", ".cpp", ".onnx-template"):
                if os.path.exists(out + suffix):
                    os.remove(out + suffix)
            shutil.rmtree(out + ".out", ignore_errors=True)
        rel, absolute = compare(reference, values)
        entry = {
            "label": label, "budget": budget, "arena": data["arena_bytes"],
            "fits": data["arena_bytes"] <= budget,
            "recomputed_ops": remat.get("recomputed_ops", 0),
            "added_flops": remat.get("added_flops", 0),
            "added_seconds": remat.get("added_seconds", 0.0),
            "step_seconds": remat.get("step_seconds", 0.0),
            "added_time_fraction": remat.get("added_time_fraction", 0.0),
            "relative_l2": rel, "max_abs": absolute,
            "numerics_ok": rel <= RELATIVE_TOLERANCE,
            "compile_seconds": round(seconds, 1),
        }
        print(f"  {label} budget {budget}: arena {entry['arena']}, "
              f"{entry['recomputed_ops']} recomputed, +{100 * entry['added_time_fraction']:.2f}%"
              f", rel L2 {rel:.2e} ({seconds:.0f} s)", file=sys.stderr)
        return entry, None, ""

    last_arena = unconstrained
    for fraction in fractions:
        budget = int(unconstrained * fraction)
        entry, smallest, message = point(budget, f"{fraction:g}x")
        if entry:
            result["points"].append(entry)
            last_arena = entry["arena"]
            continue
        result["smallest_failure"] = {"budget": budget, "message": message[:600]}
        print(f"  {fraction:g}x budget {budget}: does not fit", file=sys.stderr)
        if smallest and smallest < last_arena:
            # Fill the curve between the last fit and the smallest arena reached.
            for step, label in ((2, "between"), (1, "between"), (0, "smallest")):
                target = smallest + (last_arena - smallest) * step // 3
                if step and target >= last_arena:
                    continue
                entry, _, _ = point(target, label)
                if entry:
                    result["points"].append(entry)
                    last_arena = min(last_arena, entry["arena"])
        break
    return result


def mib(n):
    return f"{n / 1048576:.2f}"


def markdown(results, command):
    lines = [
        f"Command: `{command}` (host backend, batch 1, 2 shared cores).",
        "",
        "Each point compiles with `--memory-budget` at a fraction of the unconstrained arena "
        "(`smallest`: the smallest arena a failing budget reported); arena: the planned arena "
        "(workspaces included); added time: the report's estimate on an H100 roofline, as a "
        "share of the estimated step; numerics: worst relative L2 difference of every output "
        "(inference) or of the loss, parameters and momentum buffers after one step "
        "(training) against the unconstrained program.",
        "",
        "| model | mode | budget | budget (MiB) | arena (MiB) | arena / unconstrained "
        "| ops recomputed | added MFLOP | added time (est.) | rel. L2 vs unconstrained "
        "| compile s |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['mode']} | error: {r['error'][:120]} "
                         "|||||||||")
            continue
        a0 = r["unconstrained_arena"]
        lines.append(f"| {r['model']} | {r['mode']} | none | - | {mib(a0)} | 1.000 | 0 | 0 "
                     f"| 0 | - | {r['compile_seconds']} |")
        for p in r["points"]:
            lines.append(
                f"| {r['model']} | {r['mode']} | {p['label']} | {mib(p['budget'])} | "
                f"{mib(p['arena'])} | {p['arena'] / a0:.3f} | {p['recomputed_ops']} | "
                f"{p['added_flops'] / 1e6:.1f} | {100 * p['added_time_fraction']:.2f}% | "
                f"{p['relative_l2']:.1e} | {p['compile_seconds']} |")
        if r["smallest_failure"]:
            f = r["smallest_failure"]
            lines.append(f"| {r['model']} | {r['mode']} | {f['budget'] / a0:.2f}x: does not "
                         f"fit | {mib(f['budget'])} | | | | | | | |")
    return "\n".join(lines) + "\n"


COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
          "#7b4173", "#3182bd"]


def svg(results, command):
    """Two panels (inference, training): arena / unconstrained against added time."""
    modes = [m for m in ("inference", "train") if any(r["mode"] == m for r in results)]
    models = sorted({r["model"] for r in results})
    color = {m: COLORS[i % len(COLORS)] for i, m in enumerate(models)}
    width, panel_h, left, top, right = 1100, 330, 70, 50, 290
    exporters = {r["model"].split("/")[0] for r in results}
    label = (lambda m: m.split("/")[1]) if len(exporters) == 1 else (lambda m: m)  # noqa: E731
    plot_w = width - left - right
    height = top + len(modes) * (panel_h + 40) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{left}" y="20" font-size="14">Rematerialization: planned arena against '
           'added compute (batch 1, estimated on an H100 roofline)</text>',
           f'<text x="{left}" y="36" fill="#555" font-size="10">{command}</text>']
    for index, mode in enumerate(modes):
        y0 = top + index * (panel_h + 40)
        rows = [r for r in results if r["mode"] == mode and "error" not in r]
        xmax = max([100 * p["added_time_fraction"] for r in rows for p in r["points"]] + [1.0])
        xmax = float(np.ceil(xmax * 1.1))
        x = lambda v: left + v / xmax * plot_w  # noqa: E731
        y = lambda v: y0 + 20 + (1 - v) * (panel_h - 40)  # noqa: E731
        title = "inference" if mode == "inference" else "training step"
        out.append(f'<text x="{left}" y="{y0 + 12}" font-size="13">{title}</text>')
        if not any(r["points"] for r in rows):
            out.append(f'<text x="{left + 20}" y="{y(0.5)}" fill="#555">No model goes below '
                       'its unconstrained arena: each one peaks at a single op whose own '
                       'inputs, output and workspace fill the arena.</text>')
        out.append(f'<line x1="{left}" y1="{y(0)}" x2="{left + plot_w}" y2="{y(0)}" '
                   'stroke="black"/>')
        out.append(f'<line x1="{left}" y1="{y(0)}" x2="{left}" y2="{y(1)}" stroke="black"/>')
        for tick in np.linspace(0, 1, 6):
            out.append(f'<text x="{left - 6}" y="{y(tick) + 4}" text-anchor="end">'
                       f'{tick:.1f}</text>')
            out.append(f'<line x1="{left}" y1="{y(tick)}" x2="{left + plot_w}" '
                       f'y2="{y(tick)}" stroke="#eee"/>')
        for tick in np.linspace(0, xmax, 6):
            out.append(f'<text x="{x(tick)}" y="{y(0) + 14}" text-anchor="middle">'
                       f'{tick:.1f}%</text>')
        out.append(f'<text x="{left + plot_w / 2}" y="{y(0) + 30}" text-anchor="middle">'
                   'added step time (estimated)</text>')
        out.append(f'<text x="18" y="{(y(0) + y(1)) / 2}" transform="rotate(-90 18 '
                   f'{(y(0) + y(1)) / 2})" text-anchor="middle">arena / unconstrained</text>')
        for row, r in enumerate(rows):
            points = [(0.0, 1.0)] + [(100 * p["added_time_fraction"],
                                      p["arena"] / r["unconstrained_arena"])
                                     for p in r["points"]]
            points.sort()
            # The Pareto front: each point must lower the arena.
            front, best = [], 2.0
            for px, py in points:
                if py < best:
                    front.append((px, py))
                    best = py
            path = " ".join(f"{x(px):.1f},{y(py):.1f}" for px, py in front)
            out.append(f'<polyline fill="none" stroke="{color[r["model"]]}" stroke-width="1.5" '
                       f'points="{path}"/>')
            for px, py in front:
                out.append(f'<circle cx="{x(px):.1f}" cy="{y(py):.1f}" r="2.5" '
                           f'fill="{color[r["model"]]}"><title>{r["model"]}: arena '
                           f'{py:.3f}x at +{px:.2f}%</title></circle>')
            label_y = y0 + 30 + 14 * row
            out.append(f'<line x1="{left + plot_w + 15}" y1="{label_y - 4}" '
                       f'x2="{left + plot_w + 35}" y2="{label_y - 4}" '
                       f'stroke="{color[r["model"]]}" stroke-width="2"/>')
            smallest = min(py for _, py in front)
            out.append(f'<text x="{left + plot_w + 40}" y="{label_y}">{label(r["model"])} '
                       f'(to {smallest:.2f}x)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--models", default="",
                        help="comma-separated names (default: the foundation set)")
    parser.add_argument("--exporters", default="torchscript")
    parser.add_argument("--modes", default="inference,train")
    parser.add_argument("--fractions", default=",".join(f"{f:g}" for f in FRACTIONS))
    parser.add_argument("--time-limit", type=float, default=2.0,
                        help="--remat-time-limit per solver run")
    parser.add_argument("--json", default=os.path.join(REPO, ".dev-bench",
                                                       "remat_sweep", "raw", "remat_sweep.json"))
    parser.add_argument("--markdown", default=os.path.join(REPO, ".dev-bench",
                                                           "remat_sweep", "raw", "remat_sweep.md"))
    parser.add_argument("--svg", default=os.path.join(REPO, "docs", "remat-sweep.svg"))
    parser.add_argument("--keep", help="keep the work folder here")
    parser.add_argument("--resume", metavar="JSON",
                        help="keep the results of this earlier sweep and add the models and "
                             "modes it lacks")
    parser.add_argument("--replot", metavar="JSON",
                        help="write the table and the picture from a sweep's JSON, with the "
                             "command it records, without compiling anything")
    args = parser.parse_args()
    if args.replot:
        data = json.load(open(args.replot))
        with open(args.markdown, "w") as f:
            f.write(markdown(data["results"], data["command"]))
        with open(args.svg, "w") as f:
            f.write(svg(data["results"], data["command"]))
        return 0
    compiler = os.path.join(args.build, "bin", "memopt-compile")
    names = [n for n in args.models.split(",") if n] or zoo.VISION + zoo.TEXT
    exporters = args.exporters.split(",")
    fractions = [float(f) for f in args.fractions.split(",")]
    modes = args.modes.split(",")
    # The command as it reproduces the figures (output paths left out).
    shown, skip = [], False
    for arg in sys.argv[1:]:
        if skip:
            skip = False
        elif arg in ("--json", "--markdown", "--svg", "--keep", "--build"):
            skip = True
        elif not arg.startswith(("--json=", "--markdown=", "--svg=", "--keep=", "--build=")):
            shown.append(arg)
    command = " ".join(["python3 bench/remat_sweep.py", *shown])
    work = args.keep or tempfile.mkdtemp(prefix="remat-sweep-")
    results = []
    if args.resume:
        earlier = json.load(open(args.resume))
        results = [r for r in earlier["results"] if "error" not in r]
        command = earlier["command"]
    done = {(r["model"], r["mode"]) for r in results}
    try:
        chosen = [m for m in zoo.MODELS if m.name in names and m.exporter in exporters]
        chosen.sort(key=lambda m: (exporters.index(m.exporter), names.index(m.name)))
        for model in chosen:
            for mode in modes:
                if (model.id, mode) in done:
                    continue
                results.append(sweep_one(compiler, model, mode, fractions, args.time_limit,
                                         work))
                with open(args.json, "w") as f:
                    json.dump({"command": command, "results": results}, f, indent=1)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    with open(args.markdown, "w") as f:
        f.write(markdown(results, command.strip()))
    with open(args.svg, "w") as f:
        f.write(svg(results, command.strip()))
    bad = [(r["model"], r["mode"], p["label"]) for r in results for p in r.get("points", [])
           if not (p["fits"] and p["numerics_ok"])]
    print(markdown(results, command.strip()))
    if bad:
        print(f"points over budget or with different numbers: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
