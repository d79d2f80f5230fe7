#!/usr/bin/env python3
"""Writes models/tiny_convnet.onnx: the small model the README's main command compiles.

A ResNet-like CNN built node by node with onnx.helper, so it needs no framework:

    input 1x3x32x32
    stem:   Conv 3->16 k3 + BatchNormalization + Relu              -> 16x32x32
    block:  [Conv 16->16 k3 + BN + Relu, Conv 16->16 k3 + BN] + Add(identity) + Relu
    down:   MaxPool k2 s2                                          -> 16x16x16
    stage2: Conv 16->32 k3 + BN + Relu                             -> 32x16x16
    block:  [Conv 32->32 k3 + BN + Relu, Conv 32->32 k3 + BN] + Add(identity) + Relu
    head:   GlobalAveragePool -> Flatten -> Gemm 32->10 -> Softmax  -> 1x10

Weights come from numpy's default_rng with a fixed seed (He-scaled normal for convs, N(0, 0.05)
for Gemm, realistic BatchNorm statistics), so the file is byte-identical on every run.
Opset 17. Run: python3 python/models/make_bundled_model.py [--out models/tiny_convnet.onnx]
"""

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20240601
OPSET = 17


class GraphBuilder:
    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.initializers = []
        self.counter = 0

    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def weight(self, name, array):
        self.initializers.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def conv_bn(self, x, in_ch, out_ch, name, relu=True):
        fan_in = in_ch * 9
        w = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), size=(out_ch, in_ch, 3, 3))
        b = np.zeros(out_ch)
        conv_out = f"{name}_conv"
        self.nodes.append(
            helper.make_node(
                "Conv",
                [x, self.weight(f"{name}.weight", w), self.weight(f"{name}.bias", b)],
                [conv_out],
                name=f"{name}/Conv",
                kernel_shape=[3, 3],
                pads=[1, 1, 1, 1],
                strides=[1, 1],
            )
        )
        scale = self.rng.uniform(0.8, 1.2, size=out_ch)
        shift = self.rng.normal(0.0, 0.1, size=out_ch)
        mean = self.rng.normal(0.0, 0.1, size=out_ch)
        var = self.rng.uniform(0.5, 1.5, size=out_ch)
        bn_out = f"{name}_bn"
        self.nodes.append(
            helper.make_node(
                "BatchNormalization",
                [
                    conv_out,
                    self.weight(f"{name}.bn.scale", scale),
                    self.weight(f"{name}.bn.bias", shift),
                    self.weight(f"{name}.bn.mean", mean),
                    self.weight(f"{name}.bn.var", var),
                ],
                [bn_out],
                name=f"{name}/BatchNormalization",
                epsilon=1e-5,
            )
        )
        if not relu:
            return bn_out
        relu_out = f"{name}_relu"
        self.nodes.append(helper.make_node("Relu", [bn_out], [relu_out], name=f"{name}/Relu"))
        return relu_out

    def residual_block(self, x, channels, name):
        y = self.conv_bn(x, channels, channels, f"{name}.conv1")
        y = self.conv_bn(y, channels, channels, f"{name}.conv2", relu=False)
        sum_out = f"{name}_add"
        self.nodes.append(helper.make_node("Add", [y, x], [sum_out], name=f"{name}/Add"))
        out = f"{name}_out"
        self.nodes.append(helper.make_node("Relu", [sum_out], [out], name=f"{name}/Relu"))
        return out


def build_model():
    rng = np.random.default_rng(SEED)
    g = GraphBuilder(rng)
    x = g.conv_bn("input", 3, 16, "stem")
    x = g.residual_block(x, 16, "block1")
    g.nodes.append(
        helper.make_node(
            "MaxPool", [x], ["pool"], name="down/MaxPool", kernel_shape=[2, 2], strides=[2, 2]
        )
    )
    x = g.conv_bn("pool", 16, 32, "stage2")
    x = g.residual_block(x, 32, "block2")
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"], name="head/GlobalAveragePool"))
    g.nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="head/Flatten", axis=1))
    fc_w = g.weight("head.fc.weight", rng.normal(0.0, 0.05, size=(10, 32)))
    fc_b = g.weight("head.fc.bias", rng.normal(0.0, 0.01, size=(10,)))
    g.nodes.append(
        helper.make_node("Gemm", ["flat", fc_w, fc_b], ["logits"], name="head/Gemm", transB=1)
    )
    g.nodes.append(helper.make_node("Softmax", ["logits"], ["output"], name="head/Softmax", axis=1))

    graph = helper.make_graph(
        g.nodes,
        "tiny_convnet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])],
        initializer=g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="memopt make_bundled_model.py",
    )
    model.ir_version = 8  # opset 17 pairs with IR 8; keeps older runtimes happy
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv=None):
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(repo, "models", "tiny_convnet.onnx"))
    args = parser.parse_args(argv)
    model = build_model()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    onnx.save_model(model, args.out)
    size = os.path.getsize(args.out)
    print(f"wrote {args.out}: {len(model.graph.node)} nodes, "
          f"{len(model.graph.initializer)} initializers, {size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
