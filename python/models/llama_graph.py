#!/usr/bin/env python3
"""Generates a Llama-shaped decoder as an ONNX graph plus one external-data file of weights.

The graph mirrors what `torch.onnx.export(model, (input_ids,), dynamo=True)` (the exporter's
optimizer off, as python/models/export_today.py exports) emits for transformers'
LlamaForCausalLM: the same op forms as models/today/llama.onnx, so memopt's importer and its
attention fusion see what they see in a real export:

  * positions as Range(0, S), the causal mask as LessOrEqual of two position grids expanded to
    [B, 1, S, S] and, in every layer, Where(mask, 0, -FLT_MAX) added to the scores;
  * rotary embeddings: cos / sin of inv_freq x positions (the `inv_freq` buffer, not trained),
    applied as x * cos + rotate_half(x) * sin with Slice / Neg / Concat;
  * grouped-query attention: K and V expanded from KV heads to all heads by Unsqueeze / Expand
    / Reshape (transformers' repeat_kv; none when every head has its own K and V);
  * the decomposed scaled_dot_product_attention: Q and K^T each scaled by sqrt(1/sqrt(d)), K^T
    through Shape / Slice / Concat / Reshape / Transpose / Reshape, Softmax, IsNaN / Where;
  * RMSNorm as Pow / ReduceMean / Add / Sqrt / Reciprocal / Mul / Mul(weight, .);
  * linear layers as Transpose(W) + MatMul, the SwiGLU MLP as Sigmoid / Mul;
  * ValueInfo metadata marking parameters and buffers as the exporter does, so memopt trains
    the parameters and leaves inv_freq alone.

Shapes are static (the graph is for one batch B and sequence length S, as an export is), and the
reshape targets are baked in as the exporter bakes them. Every initializer is external data in
one file named after the config (`<config>.data`, shared by the graphs of every B x S of that
config), each tensor at a 4096-byte-aligned offset. The weights are written here, tensor by
tensor in chunks of CHUNK_ELEMENTS, so memory stays bounded whatever the model's size: each
matrix uniform with N(0, 0.02)'s deviation (UNIFORM_BOUND) from numpy's generator seeded by
(seed, tensor index), RMSNorm weights 1, inv_freq from rope theta. Same config and seed, same
bytes.

Examples:
    python3 python/models/llama_graph.py tiny --batch 2 --seq 32 --out /tmp/memopt-scale
    python3 python/models/llama_graph.py tinyllama --batch 4 --seq 1024 --graph-only
    python3 python/models/llama_graph.py --layers 4 --hidden 512 --intermediate 1376 \
        --heads 8 --kv-heads 2 --vocab 8000 --out /tmp/memopt-scale
Generated files are never committed; a 7B model (27 GB) belongs outside the repository.
"""

import argparse
import dataclasses
import math
import os
import sys
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

ALIGNMENT = 4096  # byte alignment of each tensor in the data file (a page: mmap-friendly)
CHUNK_ELEMENTS = 1 << 22  # values generated and written at once (16 MiB of float32)
INIT_STD = 0.02  # transformers' initializer_range for Llama: N(0, 0.02)
# Matrices are drawn uniform on [-b, b] with the same standard deviation as N(0, INIT_STD):
# numpy draws uniform floats 3.5 times faster than normal ones (7B's 6.7 G values in 50 s, not
# 3 min), and what the benchmark and tests need is values of the right scale, not their law.
UNIFORM_BOUND = INIT_STD * math.sqrt(3)
OPSET = 20
FLOAT_MAX = float(np.finfo(np.float32).max)
INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min
EXPORT_KIND = "pkg.torch.export.graph_signature.InputSpec.kind"


@dataclass(frozen=True)
class LlamaConfig:
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    tied: bool = False

    @property
    def head_dim(self):
        return self.hidden // self.heads

    def check(self):
        if self.hidden % self.heads or self.heads % self.kv_heads or self.head_dim % 2:
            raise ValueError(f"{self}: hidden must split into heads of an even size, and "
                             f"heads into groups of kv_heads")


CONFIGS = {
    # Tests: two layers, grouped-query attention (two query heads per K/V head).
    "tiny": LlamaConfig(layers=2, hidden=256, intermediate=688, heads=8, kv_heads=4,
                        vocab=1024),
    # CI's large model: weights of 1.07 GiB (the vocabulary and hidden size of a real model,
    # two layers), so the whole weight path is exercised while the graph stays small.
    "synthetic-1g": LlamaConfig(layers=2, hidden=2048, intermediate=5632, heads=32,
                                kv_heads=4, vocab=48000),
    # GPT-2 small and medium's sizes in Llama's shape (SwiGLU width 2/3 of 4 x hidden, tied
    # embeddings): the 124 M and 355 M rows.
    "llama-124m": LlamaConfig(layers=12, hidden=768, intermediate=2048, heads=12,
                              kv_heads=12, vocab=50257, tied=True),
    "llama-355m": LlamaConfig(layers=24, hidden=1024, intermediate=2736, heads=16,
                              kv_heads=16, vocab=50257, tied=True),
    "tinyllama": LlamaConfig(layers=22, hidden=2048, intermediate=5632, heads=32, kv_heads=4,
                             vocab=32000),
    "llama2-7b": LlamaConfig(layers=32, hidden=4096, intermediate=11008, heads=32,
                             kv_heads=32, vocab=32000),
}


# ---------------------------------------------------------------------------------------------
# Weights: names, shapes and where each one lies in the data file.
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Weight:
    name: str
    shape: tuple
    kind: str  # "matrix" (random, deviation INIT_STD), "norm" (ones) or "inv_freq" (rotary)
    offset: int  # bytes into the data file

    @property
    def elements(self):
        return math.prod(self.shape)

    @property
    def nbytes(self):
        return 4 * self.elements

    @property
    def is_parameter(self):
        return self.kind != "inv_freq"


def _aligned(offset):
    return -(-offset // ALIGNMENT) * ALIGNMENT


def weights_of(config):
    """Every initializer of the graph, in the order of LlamaForCausalLM's state dict, with its
    offset in the data file."""
    c = config
    kv = c.kv_heads * c.head_dim
    entries = [("model.embed_tokens.weight", (c.vocab, c.hidden), "matrix")]
    for i in range(c.layers):
        layer = f"model.layers.{i}"
        entries += [
            (f"{layer}.self_attn.q_proj.weight", (c.hidden, c.hidden), "matrix"),
            (f"{layer}.self_attn.k_proj.weight", (kv, c.hidden), "matrix"),
            (f"{layer}.self_attn.v_proj.weight", (kv, c.hidden), "matrix"),
            (f"{layer}.self_attn.o_proj.weight", (c.hidden, c.hidden), "matrix"),
            (f"{layer}.mlp.gate_proj.weight", (c.intermediate, c.hidden), "matrix"),
            (f"{layer}.mlp.up_proj.weight", (c.intermediate, c.hidden), "matrix"),
            (f"{layer}.mlp.down_proj.weight", (c.hidden, c.intermediate), "matrix"),
            (f"{layer}.input_layernorm.weight", (c.hidden,), "norm"),
            (f"{layer}.post_attention_layernorm.weight", (c.hidden,), "norm"),
        ]
    entries.append(("model.norm.weight", (c.hidden,), "norm"))
    if not c.tied:
        entries.append(("lm_head.weight", (c.vocab, c.hidden), "matrix"))
    entries.append(("model.rotary_emb.inv_freq", (c.head_dim // 2,), "inv_freq"))
    weights, offset = [], 0
    for name, shape, kind in entries:
        weight = Weight(name, shape, kind, offset)
        weights.append(weight)
        offset = _aligned(offset + weight.nbytes)
    return weights


def parameter_count(config):
    """Trained elements: every weight but the rotary buffer (tied embeddings once)."""
    return sum(w.elements for w in weights_of(config) if w.is_parameter)


def data_size(config):
    last = weights_of(config)[-1]
    return last.offset + last.nbytes


def inv_freq(config):
    exponents = np.arange(0, config.head_dim, 2, dtype=np.int64).astype(np.float32)
    return (1.0 / (config.rope_theta ** (exponents / config.head_dim))).astype(np.float32)


def _chunks(config, weight, index, seed):
    """The weight's values as float32 arrays of at most CHUNK_ELEMENTS, in row-major order."""
    if weight.kind == "norm":
        yield np.ones(weight.elements, np.float32)
        return
    if weight.kind == "inv_freq":
        yield inv_freq(config)
        return
    rng = np.random.default_rng([seed, index])
    left = weight.elements
    while left:
        count = min(left, CHUNK_ELEMENTS)
        chunk = rng.random(count, dtype=np.float32)
        chunk -= np.float32(0.5)
        chunk *= np.float32(2 * UNIFORM_BOUND)
        yield chunk
        left -= count


def weight_values(config, weight_name, seed=0):
    """One weight's values as the data file holds them (for tests: small models only)."""
    for index, weight in enumerate(weights_of(config)):
        if weight.name == weight_name:
            values = np.concatenate(list(_chunks(config, weight, index, seed)))
            return values.reshape(weight.shape)
    raise KeyError(weight_name)


def write_weights(config, path, seed=0):
    """Writes the data file tensor by tensor (to PATH.partial, renamed when complete)."""
    partial = path + ".partial"
    with open(partial, "wb") as stream:
        for index, weight in enumerate(weights_of(config)):
            stream.seek(weight.offset)
            for chunk in _chunks(config, weight, index, seed):
                chunk.tofile(stream)
    os.replace(partial, path)


# ---------------------------------------------------------------------------------------------
# The graph.
# ---------------------------------------------------------------------------------------------

class _Graph:
    """Nodes with unique value names (`base`, `base_1`, ...) as the exporter names them."""

    def __init__(self):
        self.nodes = []
        self.used = {}

    def name(self, base):
        count = self.used.get(base, 0)
        self.used[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def op(self, op_type, inputs, base=None, **attributes):
        output = self.name(base or op_type.lower())
        node_name = f"node_{op_type}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], name=node_name,
                                           **attributes))
        return output

    def scalar(self, value, dtype):
        tensor = helper.make_tensor("value", dtype, [], [value])
        return self.op("Constant", [], "val", value=tensor)

    def ints(self, values):
        """A 1-D int64 constant (the exporter's `value_ints` form)."""
        return self.op("Constant", [], "val", value_ints=[int(v) for v in values])


def _rms_norm(g, x, weight, eps):
    squared = g.op("Pow", [x, g.scalar(2.0, TensorProto.FLOAT)], "pow")
    mean = g.op("ReduceMean", [squared, g.ints([-1])], "mean", keepdims=1,
                noop_with_empty_axes=0)
    root = g.op("Sqrt", [g.op("Add", [mean, eps], "add")], "val")
    normalized = g.op("Mul", [x, g.op("Reciprocal", [root], "rsqrt")], "mul")
    return g.op("Mul", [weight, normalized], "mul")


def _linear(g, x, weight):
    return g.op("MatMul", [x, g.op("Transpose", [weight], "val", perm=[1, 0])], "linear")


def _heads(g, x, batch, seq, head_dim):
    """[B, S, N * d] -> [B, N, S, d]."""
    view = g.op("Reshape", [x, g.ints([batch, seq, -1, head_dim])], "view", allowzero=1)
    return g.op("Transpose", [view], "transpose", perm=[0, 2, 1, 3])


def _rotate(g, x, cos, sin, head_dim):
    """x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x[..., d/2:], x[..., :d/2])."""
    half = head_dim // 2
    first = g.op("Slice", [x, g.ints([0]), g.ints([half]), g.ints([3]), g.ints([1])], "slice")
    second = g.op("Slice", [x, g.ints([half]), g.ints([INT64_MAX]), g.ints([3]), g.ints([1])],
                  "slice")
    rotated = g.op("Concat", [g.op("Neg", [second], "neg"), first], "cat", axis=-1)
    return g.op("Add", [g.op("Mul", [x, cos], "mul"), g.op("Mul", [rotated, sin], "mul")],
                "add")


def _repeat_kv(g, x, config, batch, seq):
    """[B, KV, S, d] -> [B, H, S, d] as transformers' repeat_kv (nothing when KV == H)."""
    groups = config.heads // config.kv_heads
    if groups == 1:
        return x
    unsqueezed = g.op("Unsqueeze", [x, g.ints([2])], "unsqueeze")
    shape = g.ints([batch, config.kv_heads, groups, seq, config.head_dim])
    expanded = g.op("Identity", [g.op("Expand", [unsqueezed, shape], "expand")], "clone")
    return g.op("Reshape", [expanded, g.ints([batch, config.heads, seq, config.head_dim])],
                "_unsafe_view", allowzero=1)


def _attention(g, q, k, v, mask, head_dim):
    """torch's decomposed scaled_dot_product_attention with a boolean mask (is_causal off)."""
    scale = g.op("CastLike", [g.scalar(1.0 / math.sqrt(head_dim), TensorProto.FLOAT), q],
                 "val")
    shape = g.op("Shape", [k], "val", start=0)
    last = g.op("Slice", [shape, g.ints([-1]), g.ints([INT64_MAX])], "val")
    second_last = g.op("Slice", [shape, g.ints([-2]), g.ints([-1])], "val")
    leading = g.op("Slice", [shape, g.ints([INT64_MIN]), g.ints([-2])], "val")
    flat = g.op("Reshape", [k, g.op("Concat", [g.ints([-1]), second_last, last], "val",
                                    axis=0)], "val", allowzero=0)
    flat_t = g.op("Transpose", [flat], "val", perm=[0, 2, 1])
    k_t = g.op("Reshape", [flat_t, g.op("Concat", [leading, last, second_last], "val", axis=0)],
               "val", allowzero=0)
    q_scaled = g.op("Mul", [q, g.op("Sqrt", [scale], "val")], "val")
    k_scaled = g.op("Mul", [k_t, g.op("Sqrt", [scale], "val")], "val")
    zero = g.scalar(0.0, TensorProto.FLOAT)
    bias = g.op("Where", [mask, zero, g.scalar(-FLOAT_MAX, TensorProto.FLOAT)], "val")
    scores = g.op("Add", [g.op("MatMul", [q_scaled, k_scaled], "val"), bias], "val")
    probabilities = g.op("Softmax", [scores], "val", axis=-1)
    nan = g.op("IsNaN", [probabilities], "val")
    probabilities = g.op("Where", [nan, zero, probabilities], "val")
    return g.op("MatMul", [probabilities, v], "scaled_dot_product_attention")


def _positions(g, seq):
    """cache_position = arange(S) as the exporter builds it (int64 from float bounds)."""
    end = g.scalar(seq, TensorProto.INT64)
    start = g.op("CastLike", [g.scalar(0.0, TensorProto.FLOAT), end], "val")
    step = g.op("CastLike", [g.scalar(1.0, TensorProto.FLOAT), end], "val")
    arange = g.op("Range", [start, end, step], "arange")
    return g.op("Add", [arange, g.scalar(0, TensorProto.INT64)], "add")


def _causal_mask(g, batch, seq):
    """[B, 1, S, S] bool, true where key position <= query position."""
    query = _positions(g, seq)
    for axis in (0, 1, 3):
        query = g.op("Unsqueeze", [query, g.ints([axis])], "unsqueeze")
    key = _positions(g, seq)
    for axis in (0, 1, 2):
        key = g.op("Unsqueeze", [key, g.ints([axis])], "unsqueeze")
    allowed = g.op("LessOrEqual", [key, query], "le")
    return g.op("Expand", [allowed, g.ints([batch, 1, seq, seq])], "expand")


def _rotary(g, config, seq):
    """cos and sin [1, 1, S, d] of inv_freq x position (attention scaling 1)."""
    position_ids = g.op("Unsqueeze", [_positions(g, seq), g.ints([0])], "unsqueeze")
    freq = g.op("Unsqueeze", ["model.rotary_emb.inv_freq", g.ints([0])], "unsqueeze")
    freq = g.op("Unsqueeze", [freq, g.ints([2])], "unsqueeze")
    freq = g.op("Expand", [freq, g.ints([1, 1, 1])], "expand")
    positions = g.op("Cast", [g.op("Unsqueeze", [position_ids, g.ints([1])], "unsqueeze")],
                     "_to_copy", to=TensorProto.FLOAT)
    angles = g.op("Transpose", [g.op("MatMul", [freq, positions], "matmul")], "transpose",
                  perm=[0, 2, 1])
    emb = g.op("Concat", [angles, angles], "cat", axis=-1)
    one = g.scalar(1.0, TensorProto.FLOAT)
    cos = g.op("Mul", [g.op("Cos", [emb], "cos"), one], "mul")
    sin = g.op("Mul", [g.op("Sin", [emb], "sin"), one], "mul")
    return (g.op("Unsqueeze", [cos, g.ints([1])], "unsqueeze"),
            g.op("Unsqueeze", [sin, g.ints([1])], "unsqueeze"))


def _layer(g, config, x, i, batch, seq, mask, cos, sin, eps):
    p = f"model.layers.{i}"
    d = config.head_dim
    h = _rms_norm(g, x, f"{p}.input_layernorm.weight", eps)
    q = _heads(g, _linear(g, h, f"{p}.self_attn.q_proj.weight"), batch, seq, d)
    k = _heads(g, _linear(g, h, f"{p}.self_attn.k_proj.weight"), batch, seq, d)
    v = _heads(g, _linear(g, h, f"{p}.self_attn.v_proj.weight"), batch, seq, d)
    q, k = _rotate(g, q, cos, sin, d), _rotate(g, k, cos, sin, d)
    k, v = _repeat_kv(g, k, config, batch, seq), _repeat_kv(g, v, config, batch, seq)
    attended = g.op("Transpose", [_attention(g, q, k, v, mask, d)], "transpose",
                    perm=[0, 2, 1, 3])
    merged = g.op("Reshape", [attended, g.ints([batch, seq, -1])], "view", allowzero=1)
    x = g.op("Add", [x, _linear(g, merged, f"{p}.self_attn.o_proj.weight")], "add")
    h = _rms_norm(g, x, f"{p}.post_attention_layernorm.weight", eps)
    gate = _linear(g, h, f"{p}.mlp.gate_proj.weight")
    silu = g.op("Mul", [gate, g.op("Sigmoid", [gate], "val")], "silu")
    up = _linear(g, h, f"{p}.mlp.up_proj.weight")
    down = _linear(g, g.op("Mul", [silu, up], "mul"), f"{p}.mlp.down_proj.weight")
    return g.op("Add", [x, down], "add")


def _initializer(weight, location):
    tensor = TensorProto(name=weight.name, data_type=TensorProto.FLOAT, dims=weight.shape)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", weight.offset),
                       ("length", weight.nbytes)):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, str(value)
    return tensor


def _value_info(name, elem_type, shape, kind):
    info = helper.make_tensor_value_info(name, elem_type, list(shape))
    entry = info.metadata_props.add()
    entry.key, entry.value = EXPORT_KIND, kind
    return info


def build_model(config, batch, seq, location):
    """The ModelProto (graph only: initializers refer to `location`)."""
    config.check()
    g = _Graph()
    embed = "model.embed_tokens.weight"
    x = g.op("Gather", [embed, "input_ids"], "embedding", axis=0)
    mask = _causal_mask(g, batch, seq)
    cos, sin = _rotary(g, config, seq)
    eps = g.scalar(config.rms_eps, TensorProto.FLOAT)
    for i in range(config.layers):
        x = _layer(g, config, x, i, batch, seq, mask, cos, sin, eps)
    x = g.op("Identity", [_rms_norm(g, x, "model.norm.weight", eps)], "alias")
    head = embed if config.tied else "lm_head.weight"
    head_t = g.op("Transpose", [head], "val", perm=[1, 0])
    g.nodes.append(helper.make_node("MatMul", [x, head_t], ["logits"],
                                    name=f"node_MatMul_{len(g.nodes)}"))
    weights = weights_of(config)
    inputs = [_value_info("input_ids", TensorProto.INT64, (batch, seq), "USER_INPUT")]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             [batch, seq, config.vocab])]
    value_info = [_value_info(w.name, TensorProto.FLOAT, w.shape,
                              "PARAMETER" if w.is_parameter else "BUFFER") for w in weights]
    graph = helper.make_graph(g.nodes, "main_graph", inputs, outputs,
                              initializer=[_initializer(w, location) for w in weights],
                              value_info=value_info)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="memopt llama_graph.py")
    model.ir_version = 10
    return model


# ---------------------------------------------------------------------------------------------
# Files.
# ---------------------------------------------------------------------------------------------

def graph_path(out_dir, name, batch, seq):
    return os.path.join(out_dir, f"{name}_b{batch}_s{seq}.onnx")


def data_path(out_dir, name):
    return os.path.join(out_dir, f"{name}.data")


def generate(config, out_dir, batch, seq, name, seed=0, graph_only=False, force=False):
    """Writes OUT_DIR/NAME_bB_sS.onnx and (unless graph_only, or already there at its full
    size) OUT_DIR/NAME.data; returns the graph's path."""
    os.makedirs(out_dir, exist_ok=True)
    data = data_path(out_dir, name)
    if not graph_only and (force or not _complete(data, config)):
        write_weights(config, data, seed)
    path = graph_path(out_dir, name, batch, seq)
    onnx.save_model(build_model(config, batch, seq, os.path.basename(data)), path)
    return path


def _complete(path, config):
    return os.path.isfile(path) and os.path.getsize(path) == data_size(config)


def custom_name(config):
    c = config
    name = (f"llama_l{c.layers}_h{c.hidden}_i{c.intermediate}_a{c.heads}_kv{c.kv_heads}"
            f"_v{c.vocab}")
    if c.tied:
        name += "_tied"
    if c.rope_theta != LlamaConfig.rope_theta:
        name += f"_theta{c.rope_theta:g}"  # inv_freq, in the data file, depends on it
    return name


SIZE_FLAGS = ("layers", "hidden", "intermediate", "heads", "kv_heads", "vocab")


def config_from_args(args):
    """The named config with any size flags applied, or a config from the flags alone."""
    given = {flag: getattr(args, flag) for flag in SIZE_FLAGS if getattr(args, flag)}
    if args.rope_theta is not None:
        given["rope_theta"] = args.rope_theta
    if args.rms_eps is not None:
        given["rms_eps"] = args.rms_eps
    if args.tied:
        given["tied"] = True
    if args.config:
        return dataclasses.replace(CONFIGS[args.config], **given)
    missing = [flag for flag in SIZE_FLAGS if flag not in given and flag != "kv_heads"]
    if missing:
        sys.exit("llama_graph.py: a config name, or --" +
                 ", --".join(missing))
    given.setdefault("kv_heads", given["heads"])  # no grouping unless asked
    return LlamaConfig(**given)


def file_stem(args, config):
    """The config's name while its weights are the named config's, else one from its sizes
    (the data file is shared by the graphs of one stem; rms_eps is not in the weights)."""
    if args.name:
        return args.name
    if args.config and dataclasses.replace(config, rms_eps=0) == \
            dataclasses.replace(CONFIGS[args.config], rms_eps=0):
        return args.config
    return custom_name(config)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", choices=sorted(CONFIGS),
                        help="a named config (or give the sizes below)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--out", default="/tmp/memopt-scale", help="output folder")
    parser.add_argument("--name", help="file name stem (default: the config's name)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--graph-only", action="store_true", help="write the graph alone")
    parser.add_argument("--force", action="store_true", help="rewrite an existing data file")
    for flag in SIZE_FLAGS:
        parser.add_argument("--" + flag.replace("_", "-"), type=int)
    parser.add_argument("--rope-theta", type=float)
    parser.add_argument("--rms-eps", type=float)
    parser.add_argument("--tied", action="store_true", help="lm_head shares the embedding")
    args = parser.parse_args(argv)
    config = config_from_args(args)
    name = file_stem(args, config)
    size = data_size(config)
    print(f"{name}: {parameter_count(config) / 1e6:,.1f} M parameters, data file "
          f"{size / 2**30:.2f} GiB", flush=True)
    path = generate(config, args.out, args.batch, args.seq, name, args.seed, args.graph_only,
                    args.force)
    print(path)


if __name__ == "__main__":
    main()
