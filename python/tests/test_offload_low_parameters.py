"""--offload optimizer's low working parameters (docs/offload.md, "Low working parameters") on
the host backend: with --precision fp16 / bf16 a parameter that every device reader casts is
held on the device in that type, and the CPU update writes the rounding of its new f32 master.

- Bit for bit the plain mixed-precision program over several steps (losses as printed, every
  tensor of --save-state, the --save ONNX model): bf16 and fp16, with and without dynamic loss
  scaling, with and without --accumulate, both --offload-accumulators values.
- The weight file keeps the f32 masters after the region (--save-weights): a run resumed from
  it continues as the plain program does from its own.
- The memory report: the device weight region holds 2 bytes a parameter.
"""

import json
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from test_offload_optimizer import data, train  # noqa: E402
from test_training import COMPILE, compile_train, make_mlp, run  # noqa: E402

PARAMETERS = 16 * 8 + 16 + 3 * 16 + 3

CONFIGS = [
    # (optimizer, precision, accumulate, accumulators, extra)
    ("adamw", "bf16", 1, "host", ["--lr", "0.01"]),
    ("sgd", "bf16", 3, "host", ["--momentum", "0.9", "--lr", "0.1"]),
    ("adamw", "bf16", 3, "device", ["--lr", "0.01"]),
    ("adamw", "fp16", 1, "host", ["--lr", "0.01"]),
    ("adamw", "fp16", 1, "host", ["--lr", "0.01", "--loss-scale", "none"]),
    ("sgd", "fp16", 3, "host", ["--momentum", "0.9", "--lr", "0.1", "--loss-scale", "none"]),
    ("adamw", "fp16", 3, "device", ["--lr", "0.01"]),
    # An initial scale that overflows: the first steps are skipped alike.
    ("sgd", "fp16", 3, "device", ["--momentum", "0.9", "--lr", "0.1",
                                  "--loss-scale-init", str(2.0 ** 20)]),
]


@pytest.mark.parametrize(
    "optimizer,precision,accumulate,accumulators,args", CONFIGS,
    ids=[f"{o}-{p}-acc{a}-{w}-{i}" for i, (o, p, a, w, _) in enumerate(CONFIGS)])
def test_low_parameters_equal_the_plain_program(tmp_path, optimizer, precision, accumulate,
                                                accumulators, args):
    model = make_mlp(tmp_path / "mlp.onnx", batch=4, features=8, hidden=16, classes=3)
    x, y = data(tmp_path)
    common = ["--optimizer", optimizer, "--precision", precision, "--accumulate",
              str(accumulate), *args]
    steps = 12 if "--loss-scale-init" in args else 5
    offload = ["--offload", "optimizer"]
    if accumulate > 1:
        offload += ["--offload-accumulators", accumulators]
    plain_losses, plain = train(tmp_path, "plain", model, x, y, steps, *common)
    losses, offloaded = train(tmp_path, "offload", model, x, y, steps, *common, *offload)
    assert losses == plain_losses
    if "--loss-scale-init" in args:
        assert any("update skipped" in line for line in plain_losses)
    assert sorted(offloaded) == sorted(plain)
    for name in plain:
        # Parameters are saved as their f32 masters, as the plain program's f32 parameters.
        assert offloaded[name].dtype == plain[name].dtype, name
        assert np.array_equal(offloaded[name], plain[name], equal_nan=True), name
    assert len(set(line.split()[3] for line in plain_losses)) > 1, plain_losses
    # The device really held the parameters low: the report's weight region.
    report = tmp_path / "offload.json"
    run([COMPILE, model, "--train", *common, *offload, "--emit", "plan", "-o",
         tmp_path / "offload.mlir", "--quiet", "--report", report])
    planned = (tmp_path / "offload.mlir").read_text()
    assert f"tensor<16x8x{'bf16' if precision == 'bf16' else 'f16'}>" in planned


@pytest.mark.parametrize("loading", ["mapped", "read", "staged"])
def test_save_onnx_and_resume_from_the_weight_file(tmp_path, monkeypatch, loading):
    """--save writes the f32 masters (the plain program's ONNX model, bit for bit);
    --save-weights keeps them after the region, so a run resumed with --weights continues
    as the plain program resumed from its own file (plain SGD: no optimizer state, which an
    offloaded weight file does not carry). Were the masters lost, the resumed run would start
    from their bf16 rounding and drift. The host backend's three ways of loading and saving
    the region: mapped, read, and through the CUDA backend's staging slots."""
    if loading == "read":
        monkeypatch.setenv("MEMOPT_WEIGHT_MAP", "0")
    elif loading == "staged":
        monkeypatch.setenv("MEMOPT_WEIGHT_STAGING", "1")
    model = make_mlp(tmp_path / "mlp.onnx", batch=4, features=8, hidden=16, classes=3)
    x, y = data(tmp_path)
    common = ["--optimizer", "sgd", "--lr", "0.1", "--precision", "bf16"]
    inputs = ["--input", f"x={x}", "--input", f"labels={y}"]
    saved = {}
    for tag, extra in (("plain", []), ("offload", ["--offload", "optimizer"])):
        out = compile_train(model, tmp_path / tag, *common, *extra)
        run([out, *inputs, "--steps", "3", "--save", tmp_path / f"{tag}.onnx",
             "--save-weights", tmp_path / f"{tag}.weights"])
        resumed = run([out, *inputs, "--steps", "3", "--weights", tmp_path / f"{tag}.weights",
                       "--save", tmp_path / f"{tag}-resumed.onnx"])
        saved[tag] = [{t.name: numpy_helper.to_array(t)
                       for t in onnx.load(tmp_path / f"{tag}{suffix}.onnx").graph.initializer}
                      for suffix in ("", "-resumed")]
        saved[tag].append([line for line in resumed.stdout.splitlines()
                           if line.startswith("step ")])
    plain, low = saved["plain"], saved["offload"]
    assert low[2] == plain[2] and len(plain[2]) == 3
    for trained in (0, 1):
        assert sorted(low[trained]) == sorted(plain[trained])
        for name, value in plain[trained].items():
            assert low[trained][name].dtype == np.float32, name
            assert np.array_equal(low[trained][name], value), name
    # Training went on from the saved masters.
    assert not np.array_equal(low[1]["fc1.weight"], low[0]["fc1.weight"])
    # The file: the region, the masters (f32) after it, the trailer.
    low_file = (tmp_path / "offload.weights").stat().st_size
    assert low_file >= 4 * PARAMETERS + 2 * PARAMETERS


def test_report_halves_the_working_parameters(tmp_path):
    model = make_mlp(tmp_path / "mlp.onnx", batch=4, features=8, hidden=16, classes=3)
    reports = {}
    for tag, extra in (("f32", ["--precision", "fp32"]), ("bf16", ["--precision", "bf16"])):
        report = tmp_path / f"{tag}.json"
        run([COMPILE, model, "--train", "--optimizer", "adamw", "--offload", "optimizer",
             "--emit", "plan", "-o", tmp_path / f"{tag}.mlir", "--quiet", "--report", report,
             *extra])
        reports[tag] = json.loads(report.read_text())
    f32, bf16 = reports["f32"], reports["bf16"]
    # Each parameter's 4 bytes become 2 (the regions are 256-byte aligned per tensor).
    assert f32["weights_bytes"] - bf16["weights_bytes"] >= 2 * PARAMETERS - 4 * 256
    assert bf16["weights_bytes"] < f32["weights_bytes"]
    # The host keeps the f32 masters and moments either way.
    assert bf16["host_state_bytes"] == f32["host_state_bytes"] == 3 * 4 * PARAMETERS


def make_embedding_lm(path, batch=2, seq=6, vocab=50, width=16, seed=5):
    """An embedding table, a layer norm (its scale and bias stay f32 under mixed precision),
    a tanh block and an untied head."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((vocab, width)) * 0.5)
                                .astype(np.float32), "wte"),
        numpy_helper.from_array((1 + 0.1 * rng.standard_normal(width)).astype(np.float32),
                                "ln.weight"),
        numpy_helper.from_array((0.1 * rng.standard_normal(width)).astype(np.float32),
                                "ln.bias"),
        numpy_helper.from_array((rng.standard_normal((width, width)) * 0.4)
                                .astype(np.float32), "block.weight"),
        numpy_helper.from_array((rng.standard_normal((width, vocab)) * 0.4)
                                .astype(np.float32), "head.weight"),
    ]
    nodes = [
        helper.make_node("Gather", ["wte", "ids"], ["e"], name="embed"),
        helper.make_node("LayerNormalization", ["e", "ln.weight", "ln.bias"], ["n"],
                         axis=-1, name="ln"),
        helper.make_node("MatMul", ["n", "block.weight"], ["m"], name="block"),
        helper.make_node("Tanh", ["m"], ["h"], name="act"),
        helper.make_node("MatMul", ["h", "head.weight"], ["logits"], name="head"),
    ]
    graph = helper.make_graph(
        nodes, "embedding_lm", [helper.make_tensor_value_info("ids", TensorProto.INT64,
                                                              [batch, seq])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, seq, vocab])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_embedding_table_is_low_and_trains_alike(tmp_path, precision):
    """The gathered rows of the table are all cast: the table is held low (the gather of the
    rounded table gives the cast's bits), the layer norm's scale and bias stay f32; the
    program trains as the plain one, bit for bit."""
    model = make_embedding_lm(tmp_path / "lm.onnx")
    rng = np.random.default_rng(6)
    ids = rng.integers(0, 50, (6, 6)).astype(np.int64)
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "labels.npy", rng.integers(0, 50, (6, 6)).astype(np.int64))
    inputs = ["--input", f"ids={tmp_path / 'ids.npy'}", "--input",
              f"labels={tmp_path / 'labels.npy'}"]
    common = ["--optimizer", "adamw", "--lr", "0.01", "--precision", precision]
    results = {}
    for tag, extra in (("plain", []), ("offload", ["--offload", "optimizer"])):
        out = compile_train(model, tmp_path / tag, *common, *extra)
        state = tmp_path / f"{tag}_state"
        stdout = run([out, *inputs, "--steps", "4", "--save-state", state]).stdout
        results[tag] = ([line for line in stdout.splitlines() if line.startswith("step ")],
                        {f: np.load(state / f) for f in os.listdir(state)})
    assert results["offload"][0] == results["plain"][0]
    for name, value in results["plain"][1].items():
        assert np.array_equal(results["offload"][1][name], value), name
    low = "bf16" if precision == "bf16" else "f16"
    run([COMPILE, model, "--train", *common, "--offload", "optimizer", "--emit", "plan", "-o",
         tmp_path / "plan.mlir", "--quiet"])
    planned = (tmp_path / "plan.mlir").read_text()
    assert f'"wte" {{memopt.weight_offset' in planned
    assert f"tensor<50x16x{low}>" in planned and f"tensor<16x50x{low}>" in planned
    assert '"ln.weight" {initial_value' in planned
