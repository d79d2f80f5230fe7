"""Decoders whose attention mask is built by ops, as torch.onnx.export(dynamo=True) writes
transformers 5.x models, at any batch x sequence (for the long-sequence attention-fusion tests).

The exporter spells the mask as ops over positions (masking_utils.sdpa_mask; see
models/today/llama.onnx and gpt2.onnx): Range(0, S) for the key and the query positions,
Unsqueeze to [1, 1, 1, S] and [1, 1, S, 1], LessOrEqual, Expand to [B, 1, S, S], and in every
layer Where(mask, 0, finfo.min) added to the scores. memopt's folders stop at 65,536 elements, so
from S = 257 on the mask stays a computed tensor. Masks:

  causal   no attention_mask passed (Llama, GPT-2, Qwen2, Falcon)
  padding  an attention_mask input: new_ones And causal And attention_mask[b, key] (a GatherND
           whose indices are built by Range / Expand / Concat), as llama_mask.onnx, gpt2_mask.onnx
  window   Mistral's sliding window: new_ones And key > query - W And key <= query
  buffer   GPT-2's older causal buffer: a constant tril [1, 1, P, P] (P = 1024 positions, the
           model's maximum) sliced to [1, 1, S, S], then Where(mask, scores, finfo.min)

Families: "llama" (Q, K, V projections of their own, K and V of fewer heads repeated by
Unsqueeze / Expand / Reshape, K^T by Reshape / Transpose / Reshape as the dynamo SDPA writes it)
and "gpt2" (one [D, 3D] projection with a bias split in three, K^T by Transpose). Both scale Q
and K^T by sqrt(1/sqrt(d)) each and end the softmax with the exporter's safe softmax
(IsNaN / Where). Token embeddings in, logits out, a residual add per layer; no norms or MLPs
(the graphs are for the attention). Weights are inline and small.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
FLOAT_MIN = float(np.finfo(np.float32).min)
MASKS = ("causal", "padding", "window", "buffer")
BUFFER_POSITIONS = 1024


class _Builder:
    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.initializers = []
        self.count = 0

    def constant(self, value, dtype=np.int64, name=None):
        self.count += 1
        name = name or f"val_{self.count}"
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def weight(self, name, shape):
        values = self.rng.standard_normal(shape) / np.sqrt(shape[0])
        return self.constant(values, np.float32, name)

    def op(self, op_type, inputs, **attributes):
        self.count += 1
        output = f"{op_type.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [output],
                                           name=f"node_{op_type}_{self.count}", **attributes))
        return output


def _positions(g, seq, axes):
    """cache_position = Range(0, S) + 0, unsqueezed at `axes` (three of them)."""
    positions = g.op("Add", [g.op("Range", [g.constant(0), g.constant(seq), g.constant(1)]),
                             g.constant(0)])
    for axis in axes:
        positions = g.op("Unsqueeze", [positions, g.constant([axis])])
    return positions


def _mask(g, mask, batch, seq, window):
    """The boolean keep-mask [B, 1, S, S] (`buffer`: [1, 1, S, S])."""
    if mask == "buffer":
        tril = np.tril(np.ones((BUFFER_POSITIONS, BUFFER_POSITIONS), dtype=bool))
        return g.op("Slice", [g.constant(tril.reshape(1, 1, *tril.shape), bool),
                              g.constant([0, 0]), g.constant([seq, seq]), g.constant([2, 3])])
    keys = _positions(g, seq, (0, 1, 2))
    queries = _positions(g, seq, (0, 1, 3))
    keep = g.op("LessOrEqual", [keys, queries])
    if mask != "causal":
        ones = g.op("Cast", [g.op("Expand", [g.constant(1.0, np.float32),
                                              g.constant([], np.int64)])], to=TensorProto.BOOL)
        if mask == "window":
            recent = g.op("Greater", [keys, g.op("Sub", [queries, g.constant(window)])])
            keep = g.op("And", [g.op("And", [ones, recent]), keep])
        else:
            # attention_mask[batch_index, key]: indices [B, 1, 1, S, 2] by Expand and Concat.
            shape = g.constant([batch, 1, 1, seq])
            rows = g.op("Range", [g.constant(0), g.constant(batch), g.constant(1)])
            for axis in (1, 2, 3):
                rows = g.op("Unsqueeze", [rows, g.constant([axis])])
            index = g.op("Concat", [g.op("Unsqueeze", [g.op("Expand", [t, shape]),
                                                       g.constant([-1])]) for t in (rows, keys)],
                         axis=-1)
            present = g.op("GatherND", [g.op("Cast", ["attention_mask"], to=TensorProto.BOOL),
                                        index])
            keep = g.op("And", [g.op("And", [ones, keep]), present])
    return g.op("Expand", [keep, g.constant([batch, 1, seq, seq])])


def _heads(g, x, batch, seq, heads, head_size):
    """[B, S, heads * d] -> [B, heads, S, d]."""
    viewed = g.op("Reshape", [x, g.constant([batch, seq, heads, head_size])])
    return g.op("Transpose", [viewed], perm=[0, 2, 1, 3])


def _attention(g, family, x, layer, keep, mask, batch, seq, hidden, heads, kv_heads):
    d = hidden // heads
    if family == "gpt2":
        qkv = g.op("Add", [g.op("MatMul", [x, g.weight(f"h.{layer}.attn.c_attn.weight",
                                                        [hidden, 3 * hidden])]),
                           g.constant(np.zeros(3 * hidden), np.float32)])
        split = helper.make_node("Split", [qkv, g.constant([hidden] * 3)],
                                 [f"q_{layer}", f"k_{layer}", f"v_{layer}"], axis=2,
                                 name=f"node_Split_{layer}")
        g.nodes.append(split)
        q = _heads(g, f"q_{layer}", batch, seq, heads, d)
        v = _heads(g, f"v_{layer}", batch, seq, heads, d)
        kt = g.op("Transpose", [g.op("Reshape", [f"k_{layer}",
                                                 g.constant([batch, seq, heads, d])])],
                  perm=[0, 2, 3, 1])
    else:
        def projection(name, count):
            weight = g.weight(f"layers.{layer}.self_attn.{name}_proj.weight", [hidden, count * d])
            return _heads(g, g.op("MatMul", [x, weight]), batch, seq, count, d)

        q, k, v = projection("q", heads), projection("k", kv_heads), projection("v", kv_heads)
        if kv_heads != heads:  # transformers' repeat_kv
            repeat = [batch, kv_heads, heads // kv_heads, seq, d]
            k, v = (g.op("Reshape", [g.op("Expand", [g.op("Unsqueeze", [t, g.constant([2])]),
                                                     g.constant(repeat)]),
                                     g.constant([batch, heads, seq, d])]) for t in (k, v))
        flat = g.op("Transpose", [g.op("Reshape", [k, g.constant([-1, seq, d])])],
                    perm=[0, 2, 1])
        kt = g.op("Reshape", [flat, g.constant([batch, heads, d, seq])])
    factor = g.constant(np.sqrt(1.0 / np.sqrt(d)), np.float32)
    scores = g.op("MatMul", [g.op("Mul", [q, factor]), g.op("Mul", [kt, factor])])
    if mask == "buffer":
        scores = g.op("Where", [keep, scores, g.constant(FLOAT_MIN, np.float32)])
    else:
        scores = g.op("Add", [scores, g.op("Where", [keep, g.constant(0.0, np.float32),
                                                     g.constant(FLOAT_MIN, np.float32)])])
    probabilities = g.op("Softmax", [scores], axis=-1)
    zero = g.constant(0.0, np.float32)
    safe = g.op("Where", [g.op("IsNaN", [probabilities]), zero, probabilities])
    y = g.op("Transpose", [g.op("MatMul", [safe, v])], perm=[0, 2, 1, 3])
    y = g.op("Reshape", [y, g.constant([batch, seq, hidden])])
    output = g.op("MatMul", [y, g.weight(f"layers.{layer}.attn.out_proj.weight",
                                         [hidden, hidden])])
    return g.op("Add", [x, output])


def decoder(family, mask, batch, seq, layers=2, hidden=32, heads=4, kv_heads=2, vocab=128,
            window=64, seed=0):
    """The decoder as an onnx.ModelProto: input_ids [B, S] (and attention_mask [B, S] for the
    padding mask) in, logits [B, S, vocab] out."""
    assert family in ("llama", "gpt2") and mask in MASKS
    assert mask != "buffer" or seq <= BUFFER_POSITIONS
    g = _Builder(np.random.default_rng(seed))
    keep = _mask(g, mask, batch, seq, window)
    x = g.op("Gather", [g.weight("embed_tokens.weight", [vocab, hidden]), "input_ids"], axis=0)
    for layer in range(layers):
        x = _attention(g, family, x, layer, keep, mask, batch, seq, hidden, heads,
                       heads if family == "gpt2" else kv_heads)
    g.nodes.append(helper.make_node("MatMul", [x, g.weight("lm_head.weight", [hidden, vocab])],
                                    ["logits"], name="node_MatMul_logits"))
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq])]
    if mask == "padding":
        inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                                    [batch, seq]))
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, seq, vocab])]
    graph = helper.make_graph(g.nodes, f"{family}_{mask}", inputs, outputs, g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
