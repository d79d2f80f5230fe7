"""Writes an MLP for the --fit tests: x [8, 32] -> Gemm 256 -> Relu -> Gemm 256 -> Relu ->
Gemm 10 (the batch of 8 is fixed in the model; --fit re-batches it). With --baked, a model
whose batch of 8 is also baked into a Reshape's shape constant, which no other batch passes."""
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

if sys.argv[2:] == ["--baked"]:
    weight = numpy_helper.from_array(np.ones((16, 4), np.float32), "w")
    shape = numpy_helper.from_array(np.array([8, 16], np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="baked_reshape"),
             helper.make_node("MatMul", ["r", "w"], ["y"], name="mm")]
    graph = helper.make_graph(
        nodes, "baked", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4])], [weight, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, sys.argv[1])
    sys.exit(0)

rng = np.random.default_rng(3)
dims = [32, 256, 256, 10]
inits, nodes, current = [], [], "x"
for i in range(3):
    inits.append(numpy_helper.from_array(
        (rng.standard_normal((dims[i + 1], dims[i])) / np.sqrt(dims[i])).astype(np.float32),
        f"fc{i}.weight"))
    inits.append(numpy_helper.from_array(
        (rng.standard_normal(dims[i + 1]) * 0.1).astype(np.float32), f"fc{i}.bias"))
    out = "logits" if i == 2 else f"h{i}"
    nodes.append(helper.make_node("Gemm", [current, f"fc{i}.weight", f"fc{i}.bias"], [out],
                                  transB=1, name=f"fc{i}"))
    if i < 2:
        nodes.append(helper.make_node("Relu", [out], [f"r{i}"], name=f"relu{i}"))
        current = f"r{i}"
graph = helper.make_graph(
    nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 32])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [8, 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
save(model, sys.argv[1])
