#!/usr/bin/env python3
"""Arena with and without attention fusion at realistic transformer shapes.

The zoo's text models are small (1 x 128 tokens, 4 heads), where the attention scores are not
the peak. This builds BERT-base and GPT-2-small shaped stacks (hidden 768, 12 heads of 64, MLP
3072, erf GELU, post- / pre-LayerNorm) at 8 sequences x 512 tokens in the op-by-op form the
torchscript exporter writes (fused QKV MatMul, Split, Reshape, Transpose, MatMul, Div, GPT-2's
constant causal Where, Softmax, MatMul), with random weights, no LM head (its [8, 512, vocab]
logits would hide everything else) and a small vocabulary (embeddings are weights, not arena).
Then it plans each with `memopt-compile --emit plan --report` twice, with and without
`--no-fuse-attention`, and prints a markdown table (written to
.dev-bench/attention_arena/raw/attention.md: the suite attention_arena of bench/suites.toml).

    python3 bench/attention_bench.py [--build build] [--layers 2] [--batch 8] [--seq 512]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HIDDEN, HEADS, MLP, VOCAB = 768, 12, 3072, 1000


def build_model(kind, layers, batch, seq, rng):
    head = HIDDEN // HEADS
    nodes, inits = [], []

    def weight(name, shape, scale=0.02):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name, value, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def layer_norm(x, name):
        return node("LayerNormalization", [x, const(name + ".g", np.ones(HIDDEN)),
                                           const(name + ".b", np.zeros(HIDDEN))], name,
                    axis=-1, epsilon=1e-5)

    def linear(x, name, fan_in, fan_out):
        m = node("MatMul", [x, weight(name + ".w", [fan_in, fan_out])], name + "/MatMul")
        return node("Add", [m, weight(name + ".b", [fan_out])], name + "/Add")

    def gelu(x, name):
        d = node("Div", [x, const(name + ".sqrt2", 2 ** 0.5)], name + "/Div")
        e = node("Erf", [d], name + "/Erf")
        a = node("Add", [e, const(name + ".one", 1.0)], name + "/Add")
        m = node("Mul", [x, a], name + "/Mul")
        return node("Mul", [m, const(name + ".half", 0.5)], name + "/Mul_1")

    def attention(x, name):
        qkv = linear(x, name + "/qkv", HIDDEN, 3 * HIDDEN)
        parts = [f"{name}/q", f"{name}/k", f"{name}/v"]
        nodes.append(helper.make_node("Split", [qkv, const(name + ".split", [HIDDEN] * 3,
                                                           np.int64)], parts,
                                      name=name + "/Split", axis=2))
        shape = const(name + ".heads", [batch, seq, HEADS, head], np.int64)
        q, k, v = (node("Reshape", [p, shape], p + "/Reshape") for p in parts)
        q = node("Transpose", [q], name + "/q_t", perm=[0, 2, 1, 3])
        kt = node("Transpose", [k], name + "/k_t", perm=[0, 2, 3, 1])
        v = node("Transpose", [v], name + "/v_t", perm=[0, 2, 1, 3])
        s = node("MatMul", [q, kt], name + "/MatMul")
        s = node("Div", [s, const(name + ".scale", head ** 0.5)], name + "/Div")
        if kind == "gpt2":
            mask = np.triu(np.ones((seq, seq), dtype=bool), k=1)
            s = node("Where", [const(name + ".causal", mask, bool),
                               const(name + ".ninf", -np.inf), s], name + "/Where")
        p = node("Softmax", [s], name + "/Softmax", axis=-1)
        o = node("MatMul", [p, v], name + "/MatMul_1")
        o = node("Transpose", [o], name + "/o_t", perm=[0, 2, 1, 3])
        o = node("Reshape", [o, const(name + ".merge", [batch, seq, HIDDEN], np.int64)],
                 name + "/Reshape")
        return linear(o, name + "/proj", HIDDEN, HIDDEN)

    x = node("Gather", [weight("wte", [VOCAB, HIDDEN]), "input_ids"], "embed")
    x = node("Add", [x, weight("wpe", [seq, HIDDEN])], "embed/Add")
    for i in range(layers):
        name = f"/layer{i}"
        if kind == "bert":  # post-LayerNorm
            x = layer_norm(node("Add", [x, attention(x, name + "/attn")], name + "/res1"),
                           name + "/ln1")
            h = linear(gelu(linear(x, name + "/fc1", HIDDEN, MLP), name + "/gelu"),
                       name + "/fc2", MLP, HIDDEN)
            x = layer_norm(node("Add", [x, h], name + "/res2"), name + "/ln2")
        else:  # GPT-2: pre-LayerNorm
            x = node("Add", [x, attention(layer_norm(x, name + "/ln1"), name + "/attn")],
                     name + "/res1")
            h = linear(gelu(linear(layer_norm(x, name + "/ln2"), name + "/fc1", HIDDEN, MLP),
                            name + "/gelu"), name + "/fc2", MLP, HIDDEN)
            x = node("Add", [x, h], name + "/res2")
    nodes[-1].output[0] = "hidden"
    graph = helper.make_graph(
        nodes, kind, [helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                                    [batch, seq])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [batch, seq, HIDDEN])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def plan(build, path, workdir, flags):
    report = os.path.join(workdir, "report.json")
    proc = subprocess.run(
        [os.path.join(build, "bin", "memopt-compile"), path, "--emit", "plan", "-o",
         os.path.join(workdir, "plan.mlir"), "--report", report, "--quiet", *flags],
        capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(proc.stderr)
    return json.load(open(report))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--output", default=os.path.join(REPO, ".dev-bench",
                                                         "attention_arena", "raw", "attention.md"))
    args = parser.parse_args()
    mib = 2.0 ** 20
    scores = args.batch * HEADS * args.seq * args.seq * 4 / mib
    lines = [f"{args.layers} layers, {args.batch} x {args.seq} tokens, {HEADS} heads of "
             f"{HIDDEN // HEADS}, f32; one score tensor is {scores:.0f} MiB; sizes in MiB. "
             f"`python3 bench/attention_bench.py --layers {args.layers} --batch {args.batch} "
             f"--seq {args.seq}`", "",
             "| model | max-live unfused | arena unfused | max-live fused | arena fused "
             "| arena saved |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    with tempfile.TemporaryDirectory() as workdir:
        for kind in ("bert", "gpt2"):
            path = os.path.join(workdir, kind + ".onnx")
            onnx.save(build_model(kind, args.layers, args.batch, args.seq,
                                  np.random.default_rng(0)), path)
            unfused = plan(args.build, path, workdir, ["--no-fuse-attention"])
            fused = plan(args.build, path, workdir, [])
            lines.append(
                f"| {kind}-shaped | {unfused['max_live_bytes'] / mib:.1f} | "
                f"{unfused['arena_bytes'] / mib:.1f} | {fused['max_live_bytes'] / mib:.1f} | "
                f"{fused['arena_bytes'] / mib:.1f} | "
                f"{1 - fused['arena_bytes'] / unfused['arena_bytes']:.0%} |")
    table = "\n".join(lines)
    print(table)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        f.write(table + "\n")


if __name__ == "__main__":
    main()
