#!/usr/bin/env python3
"""Runs a memopt executable on deterministic inputs and checks it against onnxruntime.

Used by scripts/main.sh (the README's main job): writes one .npy per model input (floats of
magnitude 0.5..1.5 with random signs, token ids in [1, 100), seed 0), runs
`EXE --weights EXE.weights --input NAME=FILE.npy ... --output-dir DIR --bench N`, prints the
executable's own bench/memory lines, then each output's shape, its largest relative error
against onnxruntime (CPU) and, for a 2-D float output, the top-5 classes of the first row.
Exits non-zero when the executable fails or an output differs by more than --tolerance.
"""

import argparse
import os
import re
import subprocess
import sys

import numpy as np
import onnxruntime as ort


def file_name(name):
    return re.sub(r"[/\\: ]", "_", name) + ".npy"


def make_inputs(session, seed):
    rng = np.random.default_rng(seed)
    inputs = {}
    for info in session.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in info.shape]
        if info.type in ("tensor(int64)", "tensor(int32)"):
            dtype = np.int64 if info.type == "tensor(int64)" else np.int32
            inputs[info.name] = rng.integers(1, 100, size=shape).astype(dtype)
        elif info.type == "tensor(float)":
            magnitude = rng.uniform(0.5, 1.5, size=shape)
            sign = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
            inputs[info.name] = (magnitude * sign).astype(np.float32)
        else:
            sys.exit(f"run_check: input '{info.name}' has type {info.type}, which this script "
                     "does not generate")
    return inputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the ONNX model the executable came from")
    parser.add_argument("--exe", required=True, help="the memopt executable")
    parser.add_argument("--work", required=True, help="folder for inputs and outputs")
    parser.add_argument("--bench", type=int, default=20, help="timed runs (default 20)")
    parser.add_argument("--tolerance", type=float, default=1e-4,
                        help="largest relative error accepted (default 1e-4, fp32)")
    args = parser.parse_args()

    os.makedirs(args.work, exist_ok=True)
    session = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    inputs = make_inputs(session, seed=0)
    argv = [args.exe, "--weights", args.exe + ".weights", "--output-dir", args.work,
            "--bench", str(args.bench)]
    for name, value in inputs.items():
        path = os.path.join(args.work, "in_" + file_name(name))
        np.save(path, value)
        argv += ["--input", f"{name}={path}"]
    proc = subprocess.run(argv, capture_output=True, text=True)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        sys.exit(f"run_check: {args.exe} exited with {proc.returncode}")

    expected = session.run(None, inputs)
    worst = 0.0
    for info, reference in zip(session.get_outputs(), expected):
        got = np.load(os.path.join(args.work, file_name(info.name)))
        if got.shape != reference.shape:
            sys.exit(f"run_check: output '{info.name}' has shape {got.shape}, onnxruntime "
                     f"gives {reference.shape}")
        if reference.dtype.kind in "biu":
            error = float(np.count_nonzero(got != reference))
            print(f"output {info.name} {list(got.shape)} {got.dtype}: "
                  f"{int(error)} elements differ from onnxruntime")
        else:
            scale = max(float(np.max(np.abs(reference))), 1e-30)
            error = float(np.max(np.abs(got.astype(np.float64) - reference))) / scale
            print(f"output {info.name} {list(got.shape)} {got.dtype}: max relative error "
                  f"{error:.2e} against onnxruntime")
            if got.ndim == 2:
                top = np.argsort(-got[0])[:5]
                print("  top-5 of row 0: " +
                      ", ".join(f"{int(i)} ({float(got[0, i]):.4f})" for i in top))
        worst = max(worst, error)
    if worst > args.tolerance:
        sys.exit(f"run_check: outputs differ from onnxruntime by {worst:.3g} "
                 f"(> {args.tolerance})")
    print(f"matches onnxruntime (max relative error {worst:.2e} <= {args.tolerance})")


if __name__ == "__main__":
    main()
