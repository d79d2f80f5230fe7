#!/usr/bin/env python3
"""Generates a torchvision-shaped ResNet (18, 34, 50, 101 or 152) as an ONNX training graph.

The graph is what `torch.onnx.export(torchvision.models.resnetNN(), dynamo=True,
optimize=False)` gives for the model in eval mode once constants are folded (bench/train_bench/
export.py's ResNet export, which keeps the batch normalizations): Conv without bias ->
BatchNormalization (inference form, running statistics as initializers) -> Relu, the
bottleneck or basic blocks with their 1x1 stride-2 downsample branches, Add -> Relu after each
block, MaxPool 3x3 / 2 after the stem, GlobalAveragePool, Flatten and Gemm to `logits`.
`memopt-compile --train --bn-batch-stats` trains it with batch statistics, as PyTorch trains
the model in train mode. The weights are He-scaled normal (numpy's generator, seeded), BN scale
1 and bias 0, running mean 0 and variance 1, written as one external-data file next to the
graph; no torch is needed, so a machine without it can compile the benchmark's step.

Examples:
    python3 python/models/resnet_graph.py --depth 50 --batch 64 --out /tmp/resnet
    python3 python/models/resnet_graph.py --depth 18 --batch 8 --size 64 --classes 10 \
        --out /tmp/resnet
Generated files are never committed.
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BLOCKS = {18: ("basic", [2, 2, 2, 2]), 34: ("basic", [3, 4, 6, 3]),
          50: ("bottleneck", [3, 4, 6, 3]), 101: ("bottleneck", [3, 4, 23, 3]),
          152: ("bottleneck", [3, 8, 36, 3])}


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def tensor(self, name, array):
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def conv(self, name, x, cin, cout, kernel, stride):
        fan_in = cin * kernel * kernel
        w = self.tensor(f"{name}.weight", self.rng.standard_normal(
            (cout, cin, kernel, kernel)) * np.sqrt(2.0 / fan_in))
        pad = kernel // 2
        self.nodes.append(helper.make_node(
            "Conv", [x, w], [f"{name}_out"], name=name, kernel_shape=[kernel, kernel],
            strides=[stride, stride], pads=[pad] * 4))
        return f"{name}_out"

    def bn(self, name, x, channels, relu):
        inputs = [x, self.tensor(f"{name}.weight", np.ones(channels)),
                  self.tensor(f"{name}.bias", np.zeros(channels)),
                  self.tensor(f"{name}.running_mean", np.zeros(channels)),
                  self.tensor(f"{name}.running_var", np.ones(channels))]
        self.nodes.append(helper.make_node("BatchNormalization", inputs, [f"{name}_out"],
                                           name=name, epsilon=1e-5, momentum=0.9))
        if not relu:
            return f"{name}_out"
        self.nodes.append(helper.make_node("Relu", [f"{name}_out"], [f"{name}_relu"],
                                           name=f"{name}_relu"))
        return f"{name}_relu"

    def conv_bn(self, name, x, cin, cout, kernel, stride, relu, bn_name):
        return self.bn(bn_name, self.conv(name, x, cin, cout, kernel, stride), cout, relu)


def build(depth, batch, size, classes, seed=0):
    kind, counts = BLOCKS[depth]
    b = Builder(seed)
    x = b.conv_bn("conv1", "input", 3, 64, 7, 2, True, "bn1")
    b.nodes.append(helper.make_node("MaxPool", [x], ["maxpool_out"], name="maxpool",
                                    kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
    x, cin = "maxpool_out", 64
    expansion = 4 if kind == "bottleneck" else 1
    for stage, count in enumerate(counts):
        width = 64 * 2 ** stage
        for block in range(count):
            prefix = f"layer{stage + 1}.{block}"
            stride = 2 if stage > 0 and block == 0 else 1
            cout = width * expansion
            if kind == "bottleneck":
                y = b.conv_bn(f"{prefix}.conv1", x, cin, width, 1, 1, True, f"{prefix}.bn1")
                y = b.conv_bn(f"{prefix}.conv2", y, width, width, 3, stride, True,
                              f"{prefix}.bn2")
                y = b.conv_bn(f"{prefix}.conv3", y, width, cout, 1, 1, False,
                              f"{prefix}.bn3")
            else:
                y = b.conv_bn(f"{prefix}.conv1", x, cin, width, 3, stride, True,
                              f"{prefix}.bn1")
                y = b.conv_bn(f"{prefix}.conv2", y, width, cout, 3, 1, False,
                              f"{prefix}.bn2")
            shortcut = x
            if stride != 1 or cin != cout:
                shortcut = b.conv_bn(f"{prefix}.downsample.0", x, cin, cout, 1, stride, False,
                                     f"{prefix}.downsample.1")
            b.nodes += [helper.make_node("Add", [y, shortcut], [f"{prefix}_add"],
                                         name=f"{prefix}.add"),
                        helper.make_node("Relu", [f"{prefix}_add"], [f"{prefix}_out"],
                                         name=f"{prefix}.relu")]
            x, cin = f"{prefix}_out", cout
    fc_w = b.tensor("fc.weight", b.rng.standard_normal((classes, cin)) / np.sqrt(cin))
    fc_b = b.tensor("fc.bias", np.zeros(classes))
    b.nodes += [helper.make_node("GlobalAveragePool", [x], ["pooled"], name="avgpool"),
                helper.make_node("Flatten", ["pooled"], ["flat"], name="flatten"),
                helper.make_node("Gemm", ["flat", fc_w, fc_b], ["logits"], name="fc",
                                 transB=1)]
    graph = helper.make_graph(
        b.nodes, f"resnet{depth}",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])],
        b.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--depth", type=int, default=50, choices=sorted(BLOCKS))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="folder for NAME.onnx and NAME.data")
    args = parser.parse_args()
    model = build(args.depth, args.batch, args.size, args.classes, args.seed)
    onnx.checker.check_model(model)
    os.makedirs(args.out, exist_ok=True)
    name = f"resnet{args.depth}_b{args.batch}"
    if args.size != 224:
        name += f"_{args.size}px"
    path = os.path.join(args.out, name + ".onnx")
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location=name + ".data", size_threshold=0)
    print(path)


if __name__ == "__main__":
    main()
