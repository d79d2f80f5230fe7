"""Writes big.onnx: Y = X @ W + B with W (640 x 512 f32, 1.25 MiB) and B in
big.bin as ONNX external data (W at offset 4096), for the weight-flow tests."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, save

folder = sys.argv[1]
os.makedirs(folder, exist_ok=True)
rng = np.random.default_rng(7)
w = rng.standard_normal((640, 512)).astype(np.float32)
b = rng.standard_normal((512,)).astype(np.float32)
with open(os.path.join(folder, "big.bin"), "wb") as f:
    f.write(b"\0" * 4096)
    f.write(w.tobytes())
    f.write(b.tobytes())
np.save(os.path.join(folder, "w.npy"), w)


def external(name, dims, offset, nbytes):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in [("location", "big.bin"), ("offset", str(offset)),
                 ("length", str(nbytes))]:
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


graph = helper.make_graph(
    [helper.make_node("MatMul", ["X", "W"], ["XW"], name="mm"),
     helper.make_node("Add", ["XW", "B"], ["Y"], name="bias")],
    "big", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 640])],
    [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 512])],
    [external("W", [640, 512], 4096, w.nbytes),
     external("B", [512], 4096 + w.nbytes, b.nbytes)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
save(model, os.path.join(folder, "big.onnx"))
