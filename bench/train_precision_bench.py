#!/usr/bin/env python3
"""Mixed-precision training on the host: memory by category and precision, gradient errors.

For the bundled convnet and the foundation set (zoo VISION + TEXT at batch 1, weights filled
by python/models/fill_weights.py, the inputs of python/tests/test_training.py's foundation
test), compiles one training step (SGD, momentum 0.9) with `memopt-compile --train
--precision fp32|fp16|bf16 --report FILE.json` and tabulates from the reports: the planned
arena, the bytes held across the forward/backward boundary (saved for backward), the
gradients, the parameters' low copies and memopt-weight-casts' decision (the report's
`training.mixed_precision` section). With --run it also runs the host executables (lr 0:
the weights stay, the momentum buffer is the gradient; an fp16 step the dynamic loss scale
skipped is run again as 8 steps, and the buffer divided by 1 + 0.9 + ... for the steps that
were not skipped) and gives the loss and the
gradients' error against the fp32 step: the relative L2 of all gradients together, in unit
roundoffs of the low type (2^-11 for f16, 2^-8 for bf16), and the steps the dynamic loss
scale skipped (fp16 compiles with --loss-scale-backoff 0.0625: the scale search down to what
a model needs takes few steps). Writes Markdown tables to
.dev-bench/train_precision/raw/train_precision.md (or --output) and the figures to the .json
next to it; `python3 bench/run.py report --suite train_precision` records them.

    python3 bench/train_precision_bench.py [--build build] [--models resnet50,gpt2_nn] [--run]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python", "models"))

import fill_weights  # noqa: E402
import zoo  # noqa: E402

PRECISIONS = ("fp32", "fp16", "bf16")
UNIT = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}


def mib(n):
    return f"{n / 2**20:.2f}"


def file_name(name):
    return "".join("_" if c in "/\\: " else c for c in name) + ".npy"


def inputs_for(model, path, dest):
    """The foundation test's inputs (test_training.py, seed 7), labels and loss flags."""
    rng = np.random.default_rng(7)
    inputs = {}
    for name, (shape, dtype) in model.inputs.items():
        value = (rng.integers(0, 8192, shape).astype(np.int64) if dtype == "int64"
                 else rng.standard_normal(shape).astype(np.float32))
        inputs[name] = os.path.join(dest, f"{name}.npy")
        np.save(inputs[name], value)
    flags = []
    if model.name == "bert_nn":
        label = ("target", os.path.join(dest, "target.npy"))
        np.save(label[1], rng.standard_normal((1, 256)).astype(np.float32))
        flags += ["--loss", "mse", "--loss-output", "pooled"]
    else:
        labels = (rng.integers(0, 10 if model is zoo.BUNDLED else 1000, (1,))
                  if model.family == "vision" else rng.integers(0, 8192, (1, 128)))
        label = ("labels", os.path.join(dest, "labels.npy"))
        np.save(label[1], labels.astype(np.int64))
    if any(n.op_type == "BatchNormalization"
           for n in onnx.load(path, load_external_data=False).graph.node):
        flags.append("--bn-batch-stats")
    return inputs, label, flags


def bench_model(model, build, workdir, run):
    dest = os.path.join(workdir, model.exporter, model.name)
    os.makedirs(dest, exist_ok=True)
    if model is zoo.BUNDLED:
        path = zoo.BUNDLED_PATH
        inputs = {"input": os.path.join(dest, "input.npy")}
        np.save(inputs["input"], np.random.default_rng(7).standard_normal(
            (1, 3, 32, 32)).astype(np.float32))
        label = ("labels", os.path.join(dest, "labels.npy"))
        np.save(label[1], np.array([4], np.int64))
        flags = ["--bn-batch-stats"]
    else:
        path = fill_weights.fill(model.path, os.path.join(dest, "model"),
                                 log=open(os.devnull, "w"))
        inputs, label, flags = inputs_for(model, path, dest)
    row = {"model": model.id}
    buffers = {}
    for precision in PRECISIONS:
        out = os.path.join(dest, precision)
        report_path = out + ".json"
        begin = time.time()
        # fp16: the dynamic scale backs off by 1/16 (--loss-scale-backoff), so the search
        # through the scales these batch-1 models with filled weights need (down to 1 for
        # ResNet-50) takes a few skipped steps instead of many.
        scaling = ["--loss-scale-backoff", "0.0625"] if precision == "fp16" else []
        proc = subprocess.run([os.path.join(build, "bin", "memopt-compile"), path, "--train",
                               "--momentum", "0.9", "--lr", "0", "--precision", precision,
                               "--quiet", "--report", report_path, "-o", out,
                               "--emit", "exe" if run else "plan", *flags, *scaling],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            row[precision] = {"error": proc.stderr.strip()[-500:]}
            continue
        report = json.load(open(report_path))
        training = report["training"]
        entry = {"compile_s": round(time.time() - begin, 1), "arena": report["arena_bytes"],
                 "max_live": report["max_live_bytes"], "weights": report["weights_bytes"],
                 "saved_for_backward": training["saved_for_backward_bytes"],
                 "gradients": training["gradient_bytes"],
                 "peak_phase": training["peak_phase"]}
        mixed = training.get("mixed_precision")
        if mixed:
            entry["mixed_precision"] = mixed
        row[precision] = entry
        if not run:
            continue
        state = out + "_state"
        begin = time.time()
        # One step; fp16 again with 8 when the dynamic scale skipped it.
        for steps in (1, 8):
            argv = [out, "--steps", str(steps), "--save-state", state,
                    "--input", f"{label[0]}={label[1]}"]
            for name, file in inputs.items():
                argv += ["--input", f"{name}={file}"]
            proc = subprocess.run(argv, capture_output=True, text=True)
            if proc.returncode != 0 or "update skipped" not in proc.stdout:
                break
        if proc.returncode != 0:
            entry["run_error"] = (proc.stderr or proc.stdout).strip()[-500:]
            continue
        lines = [line for line in proc.stdout.splitlines() if line.startswith("step ")]
        entry["run_s"] = round(time.time() - begin, 1)
        entry["loss"] = float(lines[0].split()[3])
        clean = sum("update skipped" not in line for line in lines)
        entry["skipped_steps"] = len(lines) - clean
        factor = 0.0
        for _ in range(clean):
            factor = 0.9 * factor + 1.0
        names = sorted(f for f in os.listdir(state) if f.endswith(".momentum_buffer.npy"))
        buffers[precision] = {n: np.load(os.path.join(state, n)).astype(np.float64) /
                              max(factor, 1e-30) for n in names}
    if run and "fp32" in buffers:
        reference = np.concatenate([g.ravel() for g in buffers["fp32"].values()])
        for precision in ("fp16", "bf16"):
            if precision not in buffers:
                continue
            got = np.concatenate([buffers[precision][n].ravel() for n in buffers["fp32"]])
            error = float(np.linalg.norm(got - reference) / np.linalg.norm(reference))
            row[precision]["gradient_error_units"] = error / UNIT[precision]
            row[precision]["loss_error_units"] = (
                abs(row[precision]["loss"] - row["fp32"]["loss"]) /
                abs(row["fp32"]["loss"]) / UNIT[precision])
    return row


def tables(rows, run):
    memory = ["| model | arena fp32 | fp16 | bf16 | saved for backward fp32 | fp16 | bf16 | "
              "gradients fp32 | fp16 | bf16 | low weight copies (fp16) | weight casts |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
              "--- |"]
    for row in rows:
        cells = [row["model"]]
        for key in ("arena", "saved_for_backward", "gradients"):
            base = row.get("fp32", {}).get(key)
            for p in PRECISIONS:
                value = row.get(p, {}).get(key)
                if value is None:
                    cells.append("error")
                elif p == "fp32" or not base:
                    cells.append(mib(value))
                else:
                    cells.append(f"{mib(value)} ({value / base:.2f})")
        mixed = row.get("fp16", {}).get("mixed_precision", {})
        copies = mixed.get("weight_copies", {}).get("bytes")
        cells.append(f"{mib(copies)} ({mixed.get('weight_copy_count')})"
                     if copies is not None else "-")
        cells.append(mixed.get("weight_casts", {}).get("decision", "-"))
        memory.append("| " + " | ".join(cells) + " |")
    text = "\n".join(memory)
    if run:
        errors = ["| model | loss fp32 | fp16 loss error (u) | fp16 gradient error (u) | "
                  "fp16 skipped steps | bf16 loss error (u) | bf16 gradient error (u) |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for row in rows:
            f16, b16 = row.get("fp16", {}), row.get("bf16", {})

            def unit(entry, key):
                return f"{entry[key]:.2f}" if key in entry else "-"

            errors.append(f"| {row['model']} | {row.get('fp32', {}).get('loss', '-')} | "
                          f"{unit(f16, 'loss_error_units')} | "
                          f"{unit(f16, 'gradient_error_units')} | "
                          f"{f16.get('skipped_steps', '-')} | "
                          f"{unit(b16, 'loss_error_units')} | "
                          f"{unit(b16, 'gradient_error_units')} |")
        text += "\n\n" + "\n".join(errors)
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--models", default="",
                        help="comma-separated names or ids (default: bundled + foundation)")
    parser.add_argument("--run", action="store_true")
    parser.add_argument("--workdir")
    parser.add_argument("--output",
                        default=os.path.join(REPO, ".dev-bench", "train_precision", "raw",
                                             "train_precision.md"))
    args = parser.parse_args()
    wanted = [m for m in args.models.split(",") if m]
    models = [zoo.BUNDLED] + [m for m in zoo.MODELS if m.name in zoo.VISION + zoo.TEXT]
    if wanted:
        models = [m for m in models if m.name in wanted or m.id in wanted]
    workdir = args.workdir or tempfile.mkdtemp(prefix="train_precision_")
    rows = []
    for model in models:
        begin = time.time()
        rows.append(bench_model(model, os.path.abspath(args.build), workdir, args.run))
        print(json.dumps(rows[-1]), f"({time.time() - begin:.0f} s)", flush=True)
    text = tables(rows, args.run)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as handle:
        handle.write(text + "\n")
    with open(os.path.splitext(args.output)[0] + ".json", "w") as handle:
        json.dump(rows, handle, indent=1)
    print(text)


if __name__ == "__main__":
    main()
