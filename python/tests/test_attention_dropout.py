"""Attention dropout fused into memopt.attention (issue 26), end to end on the host backend.

A small causal self-attention exported in training mode, built with onnx.helper as torch's
exporters spell it: MatMul(Q, K^T) -> Div(sqrt(d)) -> Where(causal, ., -inf) -> Softmax ->
Dropout(ratio, training_mode=true) -> MatMul(., V). memopt-compile --train fuses it into one
memopt.attention with the dropout's ratio, stream and key (and memopt.attention_grad with the
same); --no-fuse-attention keeps softmax -> memopt.dropout -> matmul. The fused op draws the
dropout's own mask (the probabilities' row-major index, the op's stream, the step's key), so
one SGD step gives the same loss and gradients both ways (f32, to ~1e-5), and the loss is the
numpy forward with the mask of test_training.py's independent Philox.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from test_training import (COMPILE, dropout_scale_mask, file_name, relative_error, run, save,
                           step_losses)

BATCH, SEQ, HEADS, HEAD = 2, 6, 2, 8
WIDTH = HEADS * HEAD
RATIO = 0.3


def make_attention(path, ratio=RATIO, seed=4):
    """x [B, S, E] -> q, k, v projections -> causal attention with dropout -> output
    projection -> y [B, S, E]."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal((WIDTH, WIDTH)) * 0.4)
                                     .astype(np.float32), name)
             for name in ("wq", "wk", "wv", "wo")]
    inits += [
        numpy_helper.from_array(np.array([BATCH, SEQ, HEADS, HEAD], np.int64), "heads"),
        numpy_helper.from_array(np.array([BATCH, SEQ, WIDTH], np.int64), "merged"),
        numpy_helper.from_array(np.array(np.sqrt(HEAD), np.float32), "sqrt_d"),
        numpy_helper.from_array(np.tril(np.ones((SEQ, SEQ), bool)), "causal"),
        numpy_helper.from_array(np.array(-np.inf, np.float32), "fill"),
        numpy_helper.from_array(np.array(ratio, np.float32), "ratio"),
        numpy_helper.from_array(np.array(True), "training_mode"),
    ]
    nodes = []
    for name in ("q", "k", "v"):
        nodes += [helper.make_node("MatMul", ["x", "w" + name], [name + "_flat"]),
                  helper.make_node("Reshape", [name + "_flat", "heads"], [name + "_bshd"])]
    nodes += [
        helper.make_node("Transpose", ["q_bshd"], ["q"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["k_bshd"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["v_bshd"], ["v"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
        helper.make_node("Div", ["scores", "sqrt_d"], ["scaled"]),
        helper.make_node("Where", ["causal", "scaled", "fill"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1, name="softmax"),
        helper.make_node("Dropout", ["probs", "ratio", "training_mode"], ["dropped"],
                         name="attn_dropout"),
        helper.make_node("MatMul", ["dropped", "v"], ["context"], name="pv"),
        helper.make_node("Transpose", ["context"], ["context_bshd"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["context_bshd", "merged"], ["context_flat"]),
        helper.make_node("MatMul", ["context_flat", "wo"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "attention_dropout",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, SEQ, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [BATCH, SEQ, WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def numpy_loss(weights, x, target, mask):
    """The graph in float64 with a fixed dropout scale mask [B, H, S, S]."""
    def heads(w):
        return (x @ w).reshape(BATCH, SEQ, HEADS, HEAD).transpose(0, 2, 1, 3)
    q, k, v = heads(weights["wq"]), heads(weights["wk"]), heads(weights["wv"])
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(HEAD)
    scores = np.where(np.tril(np.ones((SEQ, SEQ), bool)), scores, -np.inf)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = (probs * mask) @ v
    y = context.transpose(0, 2, 1, 3).reshape(BATCH, SEQ, WIDTH) @ weights["wo"]
    return float(np.mean((y - target) ** 2))


def train_step(model, folder, seed, *args):
    """One SGD step (--lr 0, momentum: the momentum buffers are the gradients)."""
    out = folder / "step"
    run([COMPILE, model, "--train", "--loss", "mse", "--optimizer", "sgd", "--momentum", "0.9",
         "--lr", "0", "-o", out, "--quiet", *args])
    state = folder / "state"
    (loss,) = step_losses(run([out, "--steps", "1", "--seed", str(seed), "--save-state", state,
                               "--input", f"x={folder.parent / 'x.npy'}",
                               "--input", f"target={folder.parent / 't.npy'}"]).stdout)
    grads = {name: np.load(state / file_name(name + ".momentum_buffer"))
             for name in ("wq", "wk", "wv", "wo")}
    return loss, grads


@pytest.fixture
def attention_model(tmp_path):
    model = make_attention(tmp_path / "attention.onnx")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((BATCH, SEQ, WIDTH)).astype(np.float32)
    target = rng.standard_normal((BATCH, SEQ, WIDTH)).astype(np.float32)
    save(tmp_path / "x.npy", x)
    save(tmp_path / "t.npy", target)
    return model, x, target


def test_dropout_fuses_into_attention_and_its_gradient(tmp_path, attention_model):
    model, _, _ = attention_model
    out = tmp_path / "graph.mlir"
    run([COMPILE, model, "--train", "--loss", "mse", "--emit", "mlir", "-o", out, "--quiet"])
    text = out.read_text()
    assert "memopt.dropout" not in text
    forward = [line for line in text.splitlines() if "memopt.attention " in line]
    backward = [line for line in text.splitlines() if "memopt.attention_grad " in line]
    assert len(forward) == 1 and len(backward) == 1, text
    for line in forward + backward:
        assert "dropout_key" in line and "dropout_ratio = 3.000000e-01" in line, line
        assert "dropout_stream = 1" in line and "causal = true" in line, line
    unfused = tmp_path / "unfused.mlir"
    run([COMPILE, model, "--train", "--loss", "mse", "--emit", "mlir", "-o", unfused,
         "--quiet", "--no-fuse-attention"])
    assert "memopt.attention" not in unfused.read_text()
    assert "memopt.dropout" in unfused.read_text()


def test_fused_step_equals_unfused_step(tmp_path, attention_model):
    """Loss and every gradient of one step, fused against unfused, with two seeds (two masks);
    the loss also against numpy with the mask of the independent Philox."""
    model, x, target = attention_model
    weights = {t.name: numpy_helper.to_array(t).astype(np.float64)
               for t in onnx.load(model).graph.initializer if t.name in ("wq", "wk", "wv", "wo")}
    losses = []
    for seed in (11, 12):
        (tmp_path / f"fused{seed}").mkdir()
        (tmp_path / f"unfused{seed}").mkdir()
        fused_loss, fused = train_step(model, tmp_path / f"fused{seed}", seed)
        unfused_loss, unfused = train_step(model, tmp_path / f"unfused{seed}", seed,
                                           "--no-fuse-attention")
        assert fused_loss == pytest.approx(unfused_loss, rel=1e-5)
        for name in fused:
            assert np.linalg.norm(unfused[name]) > 0, name
            assert relative_error(fused[name], unfused[name].astype(np.float64)) <= 1e-5, name
        mask = dropout_scale_mask((BATCH, HEADS, SEQ, SEQ), RATIO, seed, micro_batch=1,
                                  stream=1)
        assert 0 < np.count_nonzero(mask) < mask.size
        assert fused_loss == pytest.approx(
            numpy_loss(weights, x.astype(np.float64), target.astype(np.float64), mask),
            rel=1e-5)
        losses.append(fused_loss)
    assert losses[0] != losses[1]


def test_attention_dropout_rng_option(tmp_path, attention_model):
    """--attention-dropout-rng memopt|auto is accepted (on the host both are memopt's mask);
    another value is refused before any work."""
    model, _, _ = attention_model
    for value in ("memopt", "auto"):
        out = tmp_path / f"graph_{value}.mlir"
        run([COMPILE, model, "--train", "--loss", "mse", "--emit", "mlir", "-o", out, "--quiet",
             "--attention-dropout-rng", value])
        assert "dropout_cudnn_rng" not in out.read_text()
    result = run([COMPILE, model, "--train", "--loss", "mse", "--emit", "mlir",
                  "-o", tmp_path / "bad.mlir", "--attention-dropout-rng", "curand"], check=False)
    assert result.returncode != 0
    assert "attention-dropout-rng 'curand' is not auto or memopt" in result.stderr
