"""Overlapped, bucketed collectives (memopt-bucket-collectives, docs/data-parallel.md
"Overlap") on the host backend: N ranks as threads, gradients grouped into buckets issued as
soon as their last gradient is complete, each update after its own bucket's wait.

The host runs every collective where it is called, so the buckets change the order of the
updates and the lifetimes the planner gives the in-flight buffers, not the arithmetic: the
oracle is the same program compiled with `--bucket-mib 0` (every collective synchronous where
it is), bit for bit, and one rank on the N-times batch within the tolerances of
test_data_parallel.py. Tiny caps split the small models into several buckets.
"""

import json

import numpy as np
import pytest

from test_data_parallel import (COMPILE, LOSS_TOLERANCE, MICRO_BATCH, MODELS, OPTIMIZERS,
                                PARAMETERS, STATE_SUFFIXES, compare_state, data, file_name,
                                make_mlp, mixed_flags, reference, run, scaled_rows, train)

__all__ = ["reference"]  # the module-scoped fixture, shared with test_data_parallel.py


def compile_step(onnx_path, out, ranks, shard, optimizer, bucket_mib, report, *extra):
    result = run([COMPILE, onnx_path, "--train", "-o", out, "--data-parallel", ranks,
                  "--shard", shard, "--bucket-mib", bucket_mib, "--report", report,
                  *OPTIMIZERS[optimizer], *extra])
    return json.load(open(report))["data_parallel"], result.stdout


@pytest.mark.parametrize("shard", ["none", "optimizer", "gradients"])
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
@pytest.mark.parametrize("model", ["mlp", "convnet"])
def test_buckets_train_as_without(tmp_path, reference, model, optimizer, shard):
    """Several buckets (a 256-byte cap) against --bucket-mib 0: the same losses, weights and
    optimizer state bit for bit; both equal one rank on the N-times batch."""
    builder, sample_shape, ranks = MODELS[model]
    x, y = data(tmp_path, sample_shape, 4 * ranks)
    expected_losses, expected_state = reference(model, optimizer, MICRO_BATCH * ranks, x, y)
    onnx_path = builder(tmp_path / "model.onnx", batch=MICRO_BATCH)
    results = {}
    for name, mib in [("buckets", 256 / 2**20), ("synchronous", 0)]:
        out = tmp_path / name
        dp, _ = compile_step(onnx_path, out, ranks, shard, optimizer, mib,
                             tmp_path / f"{name}.json")
        state = tmp_path / f"{name}_state"
        losses, stdout = train(out, x, y, state)
        results[name] = (dp, losses, state)
    dp, losses, state = results["buckets"]
    assert len(dp["buckets"]) >= 2, dp
    assert results["synchronous"][0]["buckets"] == []
    collectives = dp["all_reduces"] + dp["reduce_scatters"]
    assert sum(dp["buckets"]) > 0 and len(dp["buckets"]) <= collectives
    assert losses == results["synchronous"][1]
    for name in PARAMETERS[model]:
        for suffix in [""] + STATE_SUFFIXES[optimizer]:
            a = np.load(state / file_name(name + suffix))
            b = np.load(results["synchronous"][2] / file_name(name + suffix))
            assert np.array_equal(a, b), name + suffix
    assert losses == pytest.approx(expected_losses, rel=LOSS_TOLERANCE)
    compare_state(model, optimizer, state, expected_state, {})


@pytest.mark.parametrize("shard, reduce_dtype", [("none", "f32"), ("optimizer", "low")])
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_mixed_precision_buckets_train_as_without(tmp_path, precision, shard, reduce_dtype):
    """fp16 (dynamic loss scaling: the overflow flag's all-reduce reads every gradient, so
    every update waits for it; the flag is not bucketed) and bf16, 2 ranks, several buckets
    (a 128-byte cap) against --bucket-mib 0: the same losses, scales and skips, and the same
    state, bit for bit."""
    x, y = data(tmp_path, (8,), 8, seed=3)
    onnx_path = make_mlp(tmp_path / "model.onnx", batch=MICRO_BATCH)
    results = {}
    for name, mib in [("buckets", 128 / 2**20), ("synchronous", 0)]:
        out = tmp_path / name
        result = run([COMPILE, onnx_path, "--train", "-o", out, "--quiet", "--data-parallel", 2,
                      "--shard", shard, "--reduce-dtype", reduce_dtype, "--bucket-mib", mib,
                      "--report", tmp_path / f"{name}.json", *mixed_flags(precision)])
        assert result.returncode == 0
        state = tmp_path / f"{name}_state"
        stdout = run([out, "--steps", 4, "--input", f"x={x}", "--input", f"labels={y}",
                      "--save-state", state]).stdout
        results[name] = (scaled_rows(stdout), state)
    buckets = json.load(open(tmp_path / "buckets.json"))["data_parallel"]["buckets"]
    assert len(buckets) >= 2, buckets
    assert results["buckets"][0] == results["synchronous"][0]
    for name in PARAMETERS["mlp"]:
        for suffix in ["", ".momentum_buffer"]:
            a = np.load(results["buckets"][1] / file_name(name + suffix))
            b = np.load(results["synchronous"][1] / file_name(name + suffix))
            assert np.array_equal(a, b), name + suffix


def test_bucket_sizes_follow_the_caps(tmp_path):
    """The MLP's gradients (fc2 bias 12 B, fc2 weight 192 B, fc1 bias 64 B, fc1 weight 512 B,
    in the order the backward completes them) under caps of 200 bytes (the first bucket's is
    min(1, M) MiB, here the same): buckets close when they reach the cap; with the default
    (25 MiB, first 1 MiB) they all fit in one. The pass's report line and the text report
    name the buckets."""
    builder, _, ranks = MODELS["mlp"]
    onnx_path = builder(tmp_path / "model.onnx", batch=MICRO_BATCH)
    dp, stdout = compile_step(onnx_path, tmp_path / "small", ranks, "none", "sgd",
                              200 / 2**20, tmp_path / "small.json")
    assert len(dp["buckets"]) >= 2 and sum(dp["buckets"]) == 4 * (16 * 8 + 16 + 3 * 16 + 3)
    assert all(b >= 200 for b in dp["buckets"][:-1]), dp["buckets"]
    assert f"memopt-bucket-collectives: {len(dp['buckets'])} buckets" in stdout, stdout
    assert "overlapping the backward" in stdout, stdout
    dp, _ = compile_step(onnx_path, tmp_path / "default", ranks, "none", "sgd", 25,
                         tmp_path / "default.json")
    assert dp["buckets"] == [4 * (16 * 8 + 16 + 3 * 16 + 3)]


@pytest.mark.parametrize("args, message", [
    (["--data-parallel", "2", "--bucket-mib", "-1"],
     "--bucket-mib must be at least 0 (0: no overlap), got -1"),
])
def test_bad_bucket_options(tmp_path, args, message):
    onnx_path = MODELS["mlp"][0](tmp_path / "model.onnx", batch=MICRO_BATCH)
    result = run([COMPILE, onnx_path, "--train", "-o", tmp_path / "bad", "--quiet", *args],
                 check=False)
    assert result.returncode != 0
    assert result.stderr.count("error:") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "bad").exists()
