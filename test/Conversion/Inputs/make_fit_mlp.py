"""Writes an MLP for the --fit tests: x [8, 32] -> Gemm 256 -> Relu -> Gemm 256 -> Relu ->
Gemm 10 (the batch of 8 is fixed in the model; --fit re-batches it). With --baked, a model
whose batch of 8 is also baked into a Reshape's shape constant, which no other batch passes.
python/tests/test_fit.py imports make_mlp from here (one generator for both suites)."""
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

FEATURES, HIDDEN, CLASSES = 32, 256, 10


def make_mlp(path, batch=8, seed=3):
    """x [batch, 32] -> Gemm 256 -> Relu -> Gemm 256 -> Relu -> Gemm 10, with a fixed batch
    (the fit re-batches it). Returns the path as a string."""
    rng = np.random.default_rng(seed)
    dims = [FEATURES, HIDDEN, HIDDEN, CLASSES]
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
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, FEATURES])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, str(path))
    return str(path)


def make_baked(path):
    weight = numpy_helper.from_array(np.ones((16, 4), np.float32), "w")
    shape = numpy_helper.from_array(np.array([8, 16], np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="baked_reshape"),
             helper.make_node("MatMul", ["r", "w"], ["y"], name="mm")]
    graph = helper.make_graph(
        nodes, "baked", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4])], [weight, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, str(path))


if __name__ == "__main__":
    if sys.argv[2:] == ["--baked"]:
        make_baked(sys.argv[1])
    else:
        make_mlp(sys.argv[1])
