"""ONNX's random-number ops (RandomUniform(Like), RandomNormal(Like), Bernoulli) on the host
backend: memopt.random_uniform, dropout's counter-based Philox generator (docs/import.md,
"Random numbers").

- Inference draws from the right distribution (range, mean, spread, Bernoulli rate) and the
  same numbers on every run (a constant key [seed, 0]); two generators of one shape differ.
- A training step with the dropout torch.onnx exports for a model in training mode
  (RandomUniformLike + Less + Cast + Mul) trains: finite losses that fall, a mask redrawn every
  step (the losses differ from the step with the mask taken out), the same losses on every run;
  and recomputing the random numbers under a memory budget gives the same losses bit for bit.
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from test_training import COMPILE, compile_train, run, save  # noqa: E402


def model_of(path, nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "random", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def infer(tmp_path, model, inputs, tag):
    out = str(tmp_path / tag)
    run([COMPILE, model, "-o", out, "--target", "host", "--quiet"])
    folder = tmp_path / f"{tag}_out"
    folder.mkdir()
    argv = [out, "--weights", out + ".weights", "--output-dir", folder]
    for name, value in inputs.items():
        argv += ["--input", f"{name}={save(tmp_path / f'{tag}_{name}.npy', value)}"]
    run(argv)
    return {f[:-4]: np.load(folder / f) for f in os.listdir(folder) if f.endswith(".npy")}


def test_inference_distributions(tmp_path):
    shape = [200, 500]  # 100,000 draws: mean within ~4 sigma of 0.003 x range
    p = np.random.default_rng(0).uniform(0.1, 0.9, shape).astype(np.float32)
    nodes = [
        helper.make_node("RandomUniform", [], ["u"], shape=shape, low=-1.0, high=3.0),
        helper.make_node("RandomUniform", [], ["u2"], shape=shape, low=-1.0, high=3.0),
        helper.make_node("RandomNormalLike", ["p"], ["n"], mean=2.0, scale=0.5, seed=3.0),
        helper.make_node("Bernoulli", ["p"], ["b"]),
    ]
    model = model_of(tmp_path / "r.onnx", nodes,
                     [helper.make_tensor_value_info("p", TensorProto.FLOAT, shape)],
                     [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
                      for n in ("u", "u2", "n", "b")])
    first = infer(tmp_path, model, {"p": p}, "a")
    u, n, b = first["u"], first["n"], first["b"]
    assert u.min() >= -1.0 and u.max() < 3.0
    assert abs(float(u.mean()) - 1.0) < 0.015, u.mean()
    assert abs(float(u.std()) - 4.0 / np.sqrt(12.0)) < 0.01, u.std()
    assert not np.array_equal(u, first["u2"])  # a stream each
    assert abs(float(n.mean()) - 2.0) < 0.01 and abs(float(n.std()) - 0.5) < 0.01, (
        n.mean(), n.std())
    assert np.isfinite(n).all()
    assert set(np.unique(b)) <= {0.0, 1.0}
    # Where p is about 0.2 the rate is about 0.2, where 0.8 about 0.8.
    for lo, hi in ((0.1, 0.3), (0.7, 0.9)):
        where = (p >= lo) & (p < hi)
        assert abs(float(b[where].mean()) - float(p[where].mean())) < 0.01
    # The same numbers on every run and every compile (a constant key).
    again = infer(tmp_path, model, {"p": p}, "b")
    for name in first:
        assert np.array_equal(first[name], again[name]), name


def dropout_mlp(path, with_dropout=True, batch=8, features=16, hidden=64, classes=4):
    """fc1 -> ReLU -> dropout as torch.onnx exports it in training mode -> fc2."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array((rng.standard_normal((hidden, features)) * 0.3)
                                .astype(np.float32), "fc1.weight"),
        numpy_helper.from_array((rng.standard_normal((classes, hidden)) * 0.3)
                                .astype(np.float32), "fc2.weight"),
    ]
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"])]
    if with_dropout:
        nodes += [
            helper.make_node("RandomUniformLike", ["r"], ["rand"]),
            helper.make_node("Constant", [], ["keep"],
                             value=helper.make_tensor("keep", TensorProto.FLOAT, [], [0.7])),
            helper.make_node("Less", ["rand", "keep"], ["mask"]),
            helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["r", "maskf"], ["dropped"]),
            helper.make_node("Constant", [], ["scale"],
                             value=helper.make_tensor("scale", TensorProto.FLOAT, [],
                                                      [1 / 0.7])),
            helper.make_node("Mul", ["dropped", "scale"], ["d"]),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["r"], ["d"]))
    nodes.append(helper.make_node("Gemm", ["d", "fc2.weight"], ["logits"], transB=1))
    return model_of(path, nodes,
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, features])],
                    [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                                   [batch, classes])], inits)


def losses_of(tmp_path, model, tag, x, y, *args):
    out = compile_train(model, tmp_path / tag, "--optimizer", "sgd", "--lr", "0.05",
                        "--report", tmp_path / f"{tag}.json", *args)
    result = run([out, "--input", f"x={x}", "--input", f"labels={y}", "--steps", "12"])
    losses = [float(line.split()[-1]) for line in result.stdout.splitlines()
              if line.startswith("step ")]
    assert len(losses) == 12 and np.isfinite(losses).all(), losses
    report = json.loads((tmp_path / f"{tag}.json").read_text())
    return losses, report


def test_exported_dropout_trains(tmp_path):
    rng = np.random.default_rng(1)
    x = save(tmp_path / "x.npy", rng.standard_normal((8, 16)).astype(np.float32))
    y = save(tmp_path / "y.npy", rng.integers(0, 4, 8).astype(np.int64))
    model = dropout_mlp(tmp_path / "drop.onnx")
    losses, report = losses_of(tmp_path, model, "drop", x, y)
    assert losses[-1] < losses[0], losses
    # Trains the two weights only (the generator's key and the keep rate are not parameters).
    assert report["training"]["parameters"] == 64 * 16 + 4 * 64
    again, _ = losses_of(tmp_path, model, "again", x, y)
    assert again == losses
    plain, _ = losses_of(tmp_path, dropout_mlp(tmp_path / "plain.onnx", False), "plain", x, y)
    # Dropout changes every step's loss, and draws a new mask each step: the gaps differ.
    gaps = [a - b for a, b in zip(losses, plain)]
    assert all(abs(g) > 1e-6 for g in gaps) and len(set(np.round(gaps, 6))) > 6, gaps


def find(tree, key):
    """The first value of `key` anywhere in a JSON report."""
    if isinstance(tree, dict):
        if key in tree:
            return tree[key]
        tree = list(tree.values())
    if isinstance(tree, list):
        for item in tree:
            found = find(item, key)
            if found is not None:
                return found
    return None


def test_recomputed_random_numbers_are_the_same(tmp_path):
    """The remat solver may recompute the generator (it is a function of its key and stream);
    under a budget that forces it, the losses equal the unconstrained step's bit for bit."""
    rng = np.random.default_rng(2)
    x = save(tmp_path / "x.npy", rng.standard_normal((64, 16)).astype(np.float32))
    y = save(tmp_path / "y.npy", rng.integers(0, 4, 64).astype(np.int64))
    model = dropout_mlp(tmp_path / "drop.onnx", batch=64, hidden=256)
    losses, report = losses_of(tmp_path, model, "plain", x, y)
    arena = find(report, "arena_bytes")
    budget = ["--memory-budget", str(int(arena * 0.8)), "--remat-allow",
              "random_uniform,less,cast,mul"]
    recomputed, report = losses_of(tmp_path, model, "remat", x, y, *budget)
    kinds = json.dumps(find(report, "recomputed"))
    assert find(report, "recomputed_ops"), report
    assert "random_uniform" in kinds, kinds
    assert recomputed == losses
