"""Checkpoints of sharded data-parallel runs (issue 29 item 5; docs/data-parallel.md,
"Checkpoints"), on the host backend (N ranks as threads of the executable):

* `--save MODEL.onnx` from a run whose optimizer state (and accumulators) are sharded over the
  ranks writes one whole ONNX model: every rank takes part in gathering what the model holds,
  rank 0 writes. Its initializers are the run's parameters bit for bit (against the same run's
  `--save-state`), within 1e-5 of one rank trained on the N-times batch, and onnxruntime runs
  it to the reference model's logits.
* `--save-weights PATH` writes each rank's own weight region (PATH.rankR-of-N: the whole
  parameters and that rank's shards) and `--weights PATH` resumes from them: 3 steps, save,
  3 more steps give the losses and the state of 6 uninterrupted steps exactly (AdamW's step
  count, in the region, continues). A missing rank file is one message naming the rank.
"""

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from test_data_parallel import (COMPILE, MICRO_BATCH, OPTIMIZERS, PARAMETERS, STATE_SUFFIXES,
                                data, file_name, make_mlp, relative_error, run, step_losses)

RANKS = 3


def compile_mlp(folder, shard, optimizer, ranks=RANKS, batch=MICRO_BATCH):
    onnx_path = make_mlp(folder / f"model_{ranks}.onnx", batch=batch)
    out = folder / f"step_{ranks}_{shard}"
    flags = ["--data-parallel", ranks, "--shard", shard] if ranks > 1 else []
    run([COMPILE, onnx_path, "--train", "-o", out, "--quiet", *OPTIMIZERS[optimizer], *flags])
    return out


def train(out, x, y, steps, *args):
    result = run([out, "--steps", steps, "--input", f"x={x}", "--input", f"labels={y}", *args])
    return step_losses(result.stdout)


def initializers(path):
    model = onnx.load(str(path))
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


@pytest.mark.parametrize("shard", ["optimizer", "gradients"])
def test_sharded_save_writes_the_whole_model(tmp_path, shard):
    import onnxruntime

    x, y = data(tmp_path, (8,), 4 * RANKS)
    out = compile_mlp(tmp_path, shard, "adamw")
    train(out, x, y, 3, "--save", tmp_path / "trained.onnx", "--save-state", tmp_path / "state")
    saved = initializers(tmp_path / "trained.onnx")
    reference = compile_mlp(tmp_path, "none", "adamw", ranks=1, batch=MICRO_BATCH * RANKS)
    train(reference, x, y, 3, "--save", tmp_path / "reference.onnx")
    expected = initializers(tmp_path / "reference.onnx")
    for name in PARAMETERS["mlp"]:
        state = np.load(tmp_path / "state" / file_name(name))
        assert np.array_equal(saved[name], state), name
        assert relative_error(saved[name], expected[name]) <= 1e-5, name
    # The saved model runs, and computes what the reference computes.
    batch = np.load(x)[:MICRO_BATCH]
    logits = onnxruntime.InferenceSession(str(tmp_path / "trained.onnx")).run(
        None, {"x": batch})[0]
    reference_logits = onnxruntime.InferenceSession(str(tmp_path / "reference.onnx")).run(
        None, {"x": np.load(x)[:MICRO_BATCH * RANKS]})[0][:MICRO_BATCH]
    assert np.all(np.isfinite(logits))
    assert relative_error(logits, reference_logits) <= 1e-5


@pytest.mark.parametrize("shard", ["optimizer", "gradients"])
def test_per_rank_state_resumes_exactly(tmp_path, shard):
    # One global batch of samples: every step trains on the same batch, so a resumed run's
    # steps are the uninterrupted run's later steps.
    x, y = data(tmp_path, (8,), MICRO_BATCH * RANKS)
    out = compile_mlp(tmp_path, shard, "adamw")
    whole = train(out, x, y, 6, "--save-state", tmp_path / "whole")
    first = train(out, x, y, 3, "--save-weights", tmp_path / "ckpt")
    assert first == whole[:3]
    files = [tmp_path / f"ckpt.rank{r}-of-{RANKS}" for r in range(RANKS)]
    assert all(f.exists() for f in files) and not (tmp_path / "ckpt").exists()
    # Each rank's region holds its own shards of the AdamW moments.
    assert files[0].read_bytes() != files[1].read_bytes()
    resumed = train(out, x, y, 3, "--weights", tmp_path / "ckpt", "--save-state",
                    tmp_path / "resumed")
    assert resumed == whole[3:], (resumed, whole)
    for name in PARAMETERS["mlp"]:
        for suffix in [""] + STATE_SUFFIXES["adamw"]:
            a = np.load(tmp_path / "resumed" / file_name(name + suffix))
            b = np.load(tmp_path / "whole" / file_name(name + suffix))
            assert np.array_equal(a, b), name + suffix


def test_missing_rank_file_is_one_message(tmp_path):
    x, y = data(tmp_path, (8,), MICRO_BATCH * RANKS)
    out = compile_mlp(tmp_path, "optimizer", "sgd")
    train(out, x, y, 1, "--save-weights", tmp_path / "ckpt")
    (tmp_path / f"ckpt.rank1-of-{RANKS}").unlink()
    result = run([out, "--steps", 1, "--input", f"x={x}", "--input", f"labels={y}",
                  "--weights", tmp_path / "ckpt"], check=False)
    assert result.returncode != 0
    assert result.stderr.count("error:") == 1, result.stderr
    assert (f"rank 1: no weight file '{tmp_path / 'ckpt'}', nor this rank's own "
            f"'{tmp_path / 'ckpt'}.rank1-of-{RANKS}' (the per-rank files of --save-weights "
            f"are incomplete)") in result.stderr, result.stderr
