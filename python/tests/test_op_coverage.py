"""Every op of the memopt dialect can run: it has a host and a CUDA kernel, or a rewrite that
always removes it before lowering. So an op the importer accepts can never be one that fails to
run (the importer maps ONNX ops to dialect ops by name, docs/import.md).

The op list is the dialect's own: the ODS-generated op classes in the build folder
(MemOptOps.h.inc), not a list kept by hand. test/Conversion/Inputs/every-op.mlir holds one
instance of each op that reaches lowering, named loc("op_<name>"), each result returned and every
operand a function argument (nothing folds). It is compiled by memopt-compile for the host (and
run there on valid inputs) and for CUDA (nvcc, linked against the CUDA runtime, so a kernel that
exists only on the host fails the link). Ops that never reach lowering are listed in
ALWAYS_REWRITTEN with the rewrite, and the test checks that the rewrite removes them.

A new op fails here until it is added to every-op.mlir with kernels on both backends, or to
ALWAYS_REWRITTEN with a rewrite that the pipeline always applies. The exception: the
data-parallel collectives (all_reduce, reduce_scatter, all_gather, gather_parameter) are in
every-training-op.mlir (one rank); they run over a communicator (docs/data-parallel.md): NCCL
on CUDA (checked on a GPU by scripts/gpu_nccl_check.sh), the in-process one on the host.
"""

import os
import re
import subprocess

import numpy as np
import pytest

from conftest import BUILD_DIR, _tool
import supported_ops
import zoo

EVERY_OP = os.path.join(zoo.REPO, "test", "Conversion", "Inputs", "every-op.mlir")
EVERY_TRAINING_OP = os.path.join(zoo.REPO, "test", "Conversion", "Inputs",
                                 "every-training-op.mlir")

# Ops that never reach lowering, with the rewrite that removes them (--canonicalize, which
# memopt-compile runs before planning).
ALWAYS_REWRITTEN = {
    "shape": "folds to a constant: shapes are static",
    "identity": "folds to its operand",
}
# Ops the importer never creates (passes build them); they must run all the same.
NOT_IMPORTED = {"attention", "fused_elementwise", "conv_residual",
                # built by the training passes (docs/training.md)
                "variable", "softmax_cross_entropy", "softmax_cross_entropy_grad",
                "linear_cross_entropy", "linear_cross_entropy_grad",
                "conv_backward_filter", "pool_grad", "sgd_update", "adamw_update", "assign",
                "batch_norm_training", "batch_norm_training_grad", "batch_norm_running_update",
                "layer_normalization_grad",
                "attention_grad", "found_inf", "update_loss_scale", "relu_grad",
                # built by memopt-fuse-norm-conv (docs/layout.md)
                "batch_norm_stats", "norm_relu_apply", "norm_relu_conv",
                "norm_relu_conv_backward_filter",
                "batch_norm_relu_grad", "batch_norm_add_relu_grad",
                # built by memopt-data-parallel (docs/data-parallel.md)
                "all_reduce", "reduce_scatter", "all_gather",
                # built by memopt-bucket-collectives (docs/data-parallel.md, "Overlap")
                "wait_collectives",
                # built by memopt-data-parallel shard=parameters (ZeRO-3)
                "gather_parameter"}


def dialect_ops():
    """Op names (without `memopt.`) of the ODS-generated op classes."""
    path = os.path.join(BUILD_DIR, "include", "memopt", "Dialect", "MemOpt", "IR",
                        "MemOptOps.h.inc")
    if not os.path.isfile(path):
        pytest.fail(f"{path} not found: build memopt first (MEMOPT_BUILD_DIR={BUILD_DIR})",
                    pytrace=False)
    names = set(re.findall(r'StringLiteral\("memopt\.([a-z_0-9]+)"\)', open(path).read()))
    assert len(names) > 40, f"too few ops parsed from {path}: {sorted(names)}"
    return names


def _run(argv, timeout=900):
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(argv)}\n{proc.stderr[-4000:]}{proc.stdout[-2000:]}"
    return proc


def every_op_inputs():
    """Valid inputs for every-op.mlir's arguments, in order (indices in range, positive values
    where log, sqrt and pow need them)."""
    rng = np.random.default_rng(3)

    def floats(*shape):
        return rng.uniform(0.5, 1.5, size=shape).astype(np.float32)

    def flags(*shape):
        return rng.random(size=shape) < 0.5

    return [floats(2, 3), floats(3), flags(2, 3), flags(3),
            rng.integers(-5, 6, size=(2, 3)), rng.integers(1, 5, size=(3,)),
            floats(4, 8), floats(16, 8), floats(16), floats(1, 4, 9, 9), floats(8, 2, 3, 3),
            floats(4, 3, 3, 3), floats(4), floats(2, 5, 16), floats(16), floats(2, 4, 8, 16),
            floats(2, 4, 8, 16), floats(2, 4, 8, 16), rng.integers(0, 3, size=(2, 2)),
            np.zeros((2, 1, 3), dtype=np.int64), floats(4, 5), np.array([[0], [2]]),
            floats(2, 5), np.array([300, 300]), np.array(0), np.array(5), np.array(1),
            floats(2, 1, 3), floats(1, 3, 4, 4), floats(8, 16), floats(1, 5, 5, 4),
            floats(8, 3, 3, 2)]


def test_every_dialect_op_is_covered():
    ops = dialect_ops()
    text = open(EVERY_OP).read() + open(EVERY_TRAINING_OP).read()
    lowered = set(re.findall(r'loc\("op_([a-z_0-9]+)"\)', text))
    for name in lowered:
        assert re.search(rf"memopt\.{name}\b[^\n]*loc\(\"op_{name}\"\)", text), (
            f"every-op.mlir: loc(\"op_{name}\") is not on a memopt.{name} op")
    missing = ops - lowered - set(ALWAYS_REWRITTEN)
    assert not missing, (
        f"dialect ops that cannot run: {sorted(missing)}. Give each a host and a CUDA kernel "
        f"and add it to {EVERY_OP}, or list it in ALWAYS_REWRITTEN with the rewrite that "
        "always removes it before lowering")
    assert not (lowered & set(ALWAYS_REWRITTEN)), "an op is both lowered and rewritten"
    assert not (lowered - ops), f"every-op.mlir names ops the dialect lacks: {lowered - ops}"
    # The importer maps ONNX ops onto dialect ops by name: the documented op list (which
    # supported_ops.py mirrors) is the dialect minus the ops that passes build.
    assert set(supported_ops.DIALECT_TO_ONNX) == ops - NOT_IMPORTED


def test_always_rewritten_ops_are_removed_by_canonicalize(tmp_path):
    source = tmp_path / "rewritten.mlir"
    source.write_text(
        "func.func @main(%x: tensor<2x1x3xf32>) -> (tensor<3xi64>, tensor<2x1x3xf32>) {\n"
        "  %s = memopt.shape %x : (tensor<2x1x3xf32>) -> tensor<3xi64>\n"
        "  %i = memopt.identity %x : tensor<2x1x3xf32>\n"
        "  return %s, %i : tensor<3xi64>, tensor<2x1x3xf32>\n}\n")
    out = _run([_tool("memopt-opt"), str(source), "--canonicalize"]).stdout
    for name in ALWAYS_REWRITTEN:
        assert f"memopt.{name} " not in out, out


@pytest.mark.parametrize("target", ["host", "cuda"])
def test_every_training_op_compiles_and_the_host_step_runs(target, tmp_path):
    """The same for the ops only a training step holds (every-training-op.mlir): state
    variables land in the weight table with their role, the others reach the program as
    calls, and two host steps run with a finite loss."""
    out = str(tmp_path / "every_training_op")
    argv = [_tool("memopt-compile"), EVERY_TRAINING_OP, "-o", out, "--target", target,
            "--quiet"]
    if target == "cuda":
        argv += ["--arch", "sm_90"]
    _run(argv)
    source = open(out + (".cu" if target == "cuda" else ".cpp")).read()
    lowered = set(re.findall(r'loc\("op_([a-z_0-9]+)"\)', open(EVERY_TRAINING_OP).read()))
    for name in sorted(lowered - {"variable"}):
        assert f'"op_{name}"' in source, f"memopt.{name} did not reach the generated program"
    assert '{"w", DType::F32, 4, {2, 1, 3, 3}' in source and "WeightRole::Parameter" in source
    if target == "cuda":
        return
    x = str(tmp_path / "x.npy")
    labels = str(tmp_path / "labels.npy")
    np.save(x, np.random.default_rng(0).random((2, 1, 5, 5), dtype=np.float32))
    np.save(labels, np.array([0, 1], dtype=np.int64))
    result = _run([out, "--input", f"x={x}", "--input", f"labels={labels}", "--steps", "2"])
    losses = [float(line.split()[-1]) for line in result.stdout.splitlines()
              if line.startswith("step ")]
    assert len(losses) == 2 and all(np.isfinite(losses))


@pytest.mark.parametrize("target", ["host", "cuda"])
def test_every_op_compiles_and_the_host_program_runs(target, tmp_path):
    """memopt-compile takes every op through the pipeline and builds the program; each op's
    node name reaches the generated source (a call, or the comment of a view). The host program
    runs on valid inputs; the CUDA one is compiled with nvcc and linked (no GPU needed)."""
    out = str(tmp_path / "every_op")
    argv = [_tool("memopt-compile"), EVERY_OP, "-o", out, "--target", target, "--quiet"]
    if target == "cuda":
        argv += ["--arch", "sm_90"]
    _run(argv)
    source = open(out + (".cu" if target == "cuda" else ".cpp")).read()
    lowered = set(re.findall(r'loc\("op_([a-z_0-9]+)"\)', open(EVERY_OP).read()))
    for name in sorted(lowered):
        assert f'"op_{name}"' in source or f"// op_{name} (memopt.{name})" in source, (
            f"memopt.{name} did not reach the generated program")
    with open(out, "rb") as stream:
        assert stream.read(4) == b"\x7fELF"
    if target == "cuda":
        return
    inputs = every_op_inputs()
    assert source.count("-1, nullptr, WeightRole::Constant},") >= len(inputs)
    argv = [out, "--weights", out + ".weights", "--output-dir", str(tmp_path)]
    for index, value in enumerate(inputs):
        path = str(tmp_path / f"in{index}.npy")
        np.save(path, value)
        argv += ["--input", f"input{index}={path}"]
    _run(argv)
    outputs = {name: np.load(str(tmp_path / name))
               for name in os.listdir(tmp_path) if name.startswith("output")}
    assert len(outputs) == 74, sorted(outputs)
    for name, value in outputs.items():
        if value.dtype.kind == "f":
            assert np.all(np.isfinite(value)), name
    np.testing.assert_array_equal(outputs["output65.npy"], np.arange(5))  # range
    assert not outputs["output18.npy"].any()  # is_nan of finite values
    # cum_sum: exclusive and reversed over axis 1 of %s, then the integer one.
    s = inputs[13].astype(np.float64)
    after = np.flip(np.cumsum(np.flip(s, 1), 1), 1) - s
    np.testing.assert_allclose(outputs["output72.npy"], after, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(outputs["output73.npy"], np.cumsum(inputs[4], 1))
