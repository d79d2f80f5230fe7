"""--fit's prediction from a measured --profile-times file (docs/fit.md, "Predicted time"), end
to end on the host: the generated tiny Llama's training step, measured by its own executable
at micro-batch 4, and the fit that reads those times. At the measured micro-batch the
predicted micro-step must come back near the measured one.

The regression it guards: the times file records each ONNX node name's first executed op,
while the fit took as that name's reference the first op of the name in its plan, and the
first op named like the embedding's Gather there is a 4-byte constant the runtime never runs.
The Gather's measured time over the constant's roofline work made an efficiency of 10^7,
applied to the Gather's scatter gradient: the predicted step came out 80x the measured one
here, and 194,000 s for TinyLlama under an 8 GiB fit.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import _tool

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
sys.path[:0] = [os.path.join(REPO, "python", "models"), os.path.join(REPO, "bench")]
import llama_graph  # noqa: E402
from fit_bench.graphs import batch_free  # noqa: E402

BATCH, SEQ = 4, 64
TRAIN = ["--train", "--loss", "cross-entropy", "--loss-output", "logits", "--optimizer",
         "adamw", "--lr", "1e-4", "--precision", "bf16"]


def run(command):
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result


def test_prediction_at_the_measured_micro_batch_is_the_measurement(tmp_path):
    source = llama_graph.generate(llama_graph.CONFIGS["tiny"], str(tmp_path), BATCH, SEQ,
                                  "tiny")
    graph = tmp_path / "tiny_bf.onnx"
    batch_free(source, str(graph), BATCH, SEQ)
    rng = np.random.default_rng(0)
    for name in ("ids", "labels"):
        np.save(tmp_path / f"{name}.npy", rng.integers(0, 1024, (BATCH, SEQ)).astype(np.int64))
    compile_bin = _tool("memopt-compile")
    exe = tmp_path / "exe" / "model"
    run([compile_bin, graph, *TRAIN, "-o", exe, "--quiet", "--input-shape",
         f"input_ids={BATCH}x{SEQ}"])
    times = tmp_path / "times.json"
    profile = run([exe, "--random-weights", 1, "--input", f"input_ids={tmp_path / 'ids.npy'}",
                   "--input", f"labels={tmp_path / 'labels.npy'}", "--steps", 2,
                   "--profile-times", times])
    measured = float(next(line.split("total_ms_per_run=")[1] for line in
                          profile.stdout.splitlines() if "total_ms_per_run=" in line)) / 1e3
    assert json.loads(times.read_text())["<micro-batch>"] == BATCH

    report = tmp_path / "fit.json"
    run([compile_bin, graph, *TRAIN, "--emit", "plan", "-o", tmp_path / "fit" / "model",
         "--fit", "4GiB", "--global-batch", 16, "--fit-offload", "none", "--fit-precisions",
         "bf16", "--remat-kernel-times", times, "--report", report, "--quiet"])
    points = [p for p in json.loads(report.read_text())["fit"]["points"]
              if p["planned"] and p["micro_batch"] == BATCH and p["recomputations"] == 0]
    assert points
    predicted = points[0]["micro_step_seconds"]
    # The file times each name's first op only; the others under the name (gradients,
    # recomputations) are scaled from it by their work, so the two differ, but by a factor,
    # not by orders of magnitude.
    assert measured / 2 < predicted < 2 * measured, (predicted, measured)
