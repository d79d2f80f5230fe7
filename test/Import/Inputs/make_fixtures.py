#!/usr/bin/env python3
"""Writes the binary ONNX fixtures of test/Import into the folder argv[1].

Binary models are generated at test time (with the `onnx` package) instead of
being committed, so they stay readable here. ONNX's checker is not run: some
fixtures are broken on purpose.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inputs, outputs, initializers=(), opset=17, name="g"):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def save(m, folder, file_name):
    with open(os.path.join(folder, file_name), "wb") as f:
        f.write(m.SerializeToString())


def tensor_info(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def weights_model():
    """Large weights (dense_resource), small ones (inline), every dtype."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 8)).astype(np.float32)  # 2048 elements
    big_h = (np.arange(2000) % 7).astype(np.float16)
    inits = [
        numpy_helper.from_array(w, "W"),
        # Typed field (float_data), not raw_data.
        helper.make_tensor("B", TensorProto.FLOAT, [8],
                           [0.5, 1, 2, 3, 4, 5, 6, -7.25]),
        numpy_helper.from_array(big_h, "big.half"),
        helper.make_tensor("i8", TensorProto.INT8, [3], [-1, 2, 127]),
        helper.make_tensor("u8", TensorProto.UINT8, [2], [255, 7]),
        helper.make_tensor("flag", TensorProto.BOOL, [3], [1, 0, 1]),
        helper.make_tensor("d", TensorProto.DOUBLE, [2], [1.5, -2.0]),
        helper.make_tensor("i32", TensorProto.INT32, [2], [-3, 40000]),
        numpy_helper.from_array(np.array([9, -9], dtype=np.int64), "i64"),
        numpy_helper.from_array(np.array([1.0, -2.0], dtype=np.float16), "h"),
        helper.make_tensor("bf", TensorProto.BFLOAT16, [1], [1.5]),
    ]
    nodes = [helper.make_node("MatMul", ["X", "W"], ["XW"], name="mm"),
             helper.make_node("Add", ["XW", "B"], ["Y"], name="bias")]
    outs = [tensor_info("Y", TensorProto.FLOAT, [2, 8]),
            tensor_info("big.half", TensorProto.FLOAT16, [2000])]
    for n, t, s in [("i8", TensorProto.INT8, [3]), ("u8", TensorProto.UINT8, [2]),
                    ("flag", TensorProto.BOOL, [3]),
                    ("d", TensorProto.DOUBLE, [2]),
                    ("i32", TensorProto.INT32, [2]),
                    ("i64", TensorProto.INT64, [2]),
                    ("h", TensorProto.FLOAT16, [2]),
                    ("bf", TensorProto.BFLOAT16, [1])]:
        outs.append(tensor_info(n, t, s))
    return model(nodes, [tensor_info("X", TensorProto.FLOAT, ["batch", 256])],
                 outs, inits, name="weights")


def external_models(folder):
    """W (2048 floats) in external.bin at offset 64; one model points at a
    file that does not exist."""
    w = (np.arange(2048, dtype=np.float32) / 8).reshape(256, 8)
    with open(os.path.join(folder, "external.bin"), "wb") as f:
        f.write(b"\0" * 64)
        f.write(w.tobytes())
    def make(location):
        t = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[256, 8])
        t.data_location = TensorProto.EXTERNAL
        for k, v in [("location", location), ("offset", "64"),
                     ("length", str(w.nbytes))]:
            e = t.external_data.add()
            e.key, e.value = k, v
        return model([helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")],
                     [tensor_info("X", TensorProto.FLOAT, [1, 256])],
                     [tensor_info("Y", TensorProto.FLOAT, [1, 8])], [t])
    save(make("external.bin"), folder, "external.onnx")
    save(make("no_such_weights.bin"), folder, "external_missing.onnx")


def named_models(folder):
    """Nodes with names, for locations and errors that name them."""
    nodes = [
        helper.make_node("Conv", ["X", "Wc"], ["c"], name="stem/conv",
                         pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="stem/relu"),
        helper.make_node("Relu", ["r"], ["Y"]),  # no name: Relu_2
    ]
    wc = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "Wc")
    save(model(nodes, [tensor_info("X", TensorProto.FLOAT, [1, 3, 8, 8])],
               [tensor_info("Y", TensorProto.FLOAT, [1, 4, 8, 8])], [wc]),
         folder, "named.onnx")

    # The shape of the Reshape comes from a graph input: not a constant.
    save(model([helper.make_node("Reshape", ["X", "S"], ["Y"],
                                 name="reshape_dyn")],
               [tensor_info("X", TensorProto.FLOAT, [2, 3]),
                tensor_info("S", TensorProto.INT64, [2])],
               [tensor_info("Y", TensorProto.FLOAT, [3, 2])]),
         folder, "nonconst_shape.onnx")

    # Shapes that do not broadcast: the op's inference fails.
    save(model([helper.make_node("Add", ["A", "B"], ["Y"], name="bad_add")],
               [tensor_info("A", TensorProto.FLOAT, [2, 3]),
                tensor_info("B", TensorProto.FLOAT, [4])],
               [tensor_info("Y", TensorProto.FLOAT, [2, 3])]),
         folder, "bad_broadcast.onnx")

    # Old exporters list initializers among the graph inputs.
    b = numpy_helper.from_array(np.array([1, 2], np.float32), "B")
    save(model([helper.make_node("Add", ["X", "B"], ["Y"], name="add")],
               [tensor_info("X", TensorProto.FLOAT, [2]),
                tensor_info("B", TensorProto.FLOAT, [2])],
               [tensor_info("Y", TensorProto.FLOAT, [2])], [b]),
         folder, "initializer_as_input.onnx")


def optional_input_models(folder):
    """Optional inputs left empty ("") before a given one, which ONNX's text
    format of 1.12 cannot write."""
    inits = [numpy_helper.from_array(np.array(6.0, np.float32), "hi"),
             numpy_helper.from_array(np.array([1, 2], np.int64), "pads"),
             numpy_helper.from_array(np.array([-1], np.int64), "axes")]
    nodes = [helper.make_node("Clip", ["X", "", "hi"], ["C"], name="clip_max"),
             helper.make_node("Pad", ["C", "pads", "", "axes"], ["Y"],
                              name="pad_last")]
    save(model(nodes, [tensor_info("X", TensorProto.FLOAT, [2, 3])],
               [tensor_info("Y", TensorProto.FLOAT, [2, 6])], inits, opset=18),
         folder, "optional_inputs.onnx")

    # Training-mode Dropout whose mask output is read by another node.
    dropout_inits = [numpy_helper.from_array(np.array(0.5, np.float32), "ratio"),
                     numpy_helper.from_array(np.array(True), "training")]
    save(model([helper.make_node("Dropout", ["X", "ratio", "training"], ["D", "mask"],
                                 name="drop"),
                helper.make_node("Not", ["mask"], ["Y"], name="use_mask")],
               [tensor_info("X", TensorProto.FLOAT, [4])],
               [tensor_info("D", TensorProto.FLOAT, [4]),
                tensor_info("Y", TensorProto.BOOL, [4])], dropout_inits),
         folder, "dropout_mask.onnx")


def main():
    folder = sys.argv[1]
    os.makedirs(folder, exist_ok=True)
    weights = weights_model()
    save(weights, folder, "weights.onnx")
    data = weights.SerializeToString()
    with open(os.path.join(folder, "truncated.onnx"), "wb") as f:
        f.write(data[: len(data) // 2])
    with open(os.path.join(folder, "not_onnx.onnx"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    external_models(folder)
    named_models(folder)
    optional_input_models(folder)


if __name__ == "__main__":
    main()
