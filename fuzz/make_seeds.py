#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target into OUT/<target>/ (generated, not committed).

  fuzz-onnx-import    small ONNX models (onnx.helper): a conv net, attention, a shape sub-graph,
                      opset 18 and 20 operators, layer norm; all valid
  fuzz-mlir-passes    the same models imported by memopt-translate (--translate), and every
                      `// -----` case of test/Dialect and test/Transforms
  fuzz-planner-csv    small problems in MiniMalloc's CSV format
  fuzz-runtime-files  .npy files of every dtype (prefix byte 0) and weight files (prefix byte 1)
                      for FuzzRuntimeFiles.cpp's program, with and without the trailer

usage: make_seeds.py OUT [--translate build/bin/memopt-translate]
"""

import argparse
import glob
import io
import os
import struct
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "seed", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset <= 17 else 10
    return model


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _w(name, shape, seed=0):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def _i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def onnx_seeds():
    node = helper.make_node
    yield "convnet", _model(
        [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
         node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"], name="bn"),
         node("Relu", ["n"], ["r"], name="relu"),
         node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
         node("GlobalAveragePool", ["p"], ["g"], name="gap"),
         node("Flatten", ["g"], ["f"], name="flat"),
         node("Gemm", ["f", "fw", "fb"], ["y"], transB=1, name="fc")],
        [_f("x", [1, 3, 8, 8])], [_f("y", [1, 5])],
        [_w("w", [4, 3, 3, 3]), _w("b", [4]), _w("s", [4]), _w("bb", [4]), _w("m", [4]),
         numpy_helper.from_array(np.ones(4, np.float32), "v"), _w("fw", [5, 4]), _w("fb", [5])])
    yield "attention", _model(
        [node("MatMul", ["q", "kt"], ["s"], name="qk"),
         node("Mul", ["s", "scale"], ["ss"], name="scale"),
         node("Softmax", ["ss"], ["a"], axis=-1, name="softmax"),
         node("MatMul", ["a", "v"], ["o"], name="av"),
         node("Add", ["o", "q"], ["y"], name="residual")],
        [_f("q", [1, 2, 8, 4]), _f("kt", [1, 2, 4, 8]), _f("v", [1, 2, 8, 4])],
        [_f("y", [1, 2, 8, 4])],
        [numpy_helper.from_array(np.array(0.5, np.float32), "scale")])
    yield "shape_subgraph", _model(
        [node("Shape", ["x"], ["sh"], name="shape"),
         node("Gather", ["sh", "zero"], ["n"], axis=0, name="gather"),
         node("Unsqueeze", ["n", "axes"], ["n1"], name="unsq"),
         node("Concat", ["n1", "minus1"], ["target"], axis=0, name="concat"),
         node("Reshape", ["x", "target"], ["r"], name="reshape"),
         node("Transpose", ["r"], ["t"], perm=[1, 0], name="transpose"),
         node("Tanh", ["t"], ["y"], name="tanh")],
        [_f("x", [2, 3, 4])], [_f("y", [12, 2])],
        [_i64("zero", 0), _i64("axes", [0]), _i64("minus1", [-1])])
    yield "opset18", _model(
        [node("ReduceMean", ["x", "axes"], ["m"], keepdims=1, name="mean"),
         node("Sub", ["x", "m"], ["d"], name="center"),
         node("Split", ["d"], ["a", "b"], axis=1, num_outputs=2, name="split"),
         node("Pad", ["a", "pads"], ["p"], name="pad"),
         node("Concat", ["p", "b"], ["y"], axis=1, name="concat")],
        [_f("x", [2, 4])], [_f("y", [2, 5])],
        [_i64("axes", [1]), _i64("pads", [0, 1, 0, 0])], opset=18)
    yield "opset20", _model(
        [node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, name="ln"),
         node("MatMul", ["n", "w"], ["h"], name="up"),
         node("Gelu", ["h"], ["a"], name="gelu"),
         node("Erf", ["a"], ["e"], name="erf"),
         node("ReduceMax", ["e", "axes"], ["y"], keepdims=0, name="max")],
        [_f("x", [2, 3, 8])], [_f("y", [2, 3])],
        [_w("g", [8]), _w("b", [8]), _w("w", [8, 16]), _i64("axes", [2])], opset=20)
    yield "slice_where", _model(
        [node("Slice", ["x", "starts", "ends", "axes1"], ["s"], name="slice"),
         node("Greater", ["s", "zerof"], ["c"], name="greater"),
         node("Where", ["c", "s", "zerof"], ["w"], name="where"),
         node("Expand", ["w", "shape"], ["e"], name="expand"),
         node("Cast", ["e"], ["y"], to=TensorProto.FLOAT16, name="cast")],
        [_f("x", [4, 6])], [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 4, 3])],
        [_i64("starts", [1]), _i64("ends", [4]), _i64("axes1", [1]),
         numpy_helper.from_array(np.array(0, np.float32), "zerof"), _i64("shape", [2, 4, 3])])


def mlir_cases():
    patterns = [os.path.join(REPO, "test", area, "**", "*.mlir") for area in ("Dialect", "Transforms")]
    for path in sorted(p for pattern in patterns for p in glob.glob(pattern, recursive=True)):
        with open(path) as stream:
            text = stream.read()
        for i, case in enumerate(text.split("// -----")):
            lines = [l for l in case.splitlines() if not l.lstrip().startswith("// ")]
            body = "\n".join(lines).strip()
            if body:
                yield f"{os.path.basename(path)[:-5]}-{i}", body + "\n"


CSV_SEEDS = {
    "simple": "id,lower,upper,size\n0,0,3,64\n1,1,4,128\n2,3,6,64\n3,5,8,256\n",
    "aligned": "id,lower,upper,size,alignment\n0,0,2,100,64\n1,1,3,30,16\n2,2,5,7,1\n",
    "zero_sizes": "id,lower,upper,size\n0,0,1,0\n1,0,9,512\n2,4,5,0\n3,2,7,64\n",
    "chain": "".join(["id,lower,upper,size\n"] + [f"{i},{i},{i + 2},{(i % 5 + 1) * 32}\n"
                                                 for i in range(20)]),
}

# FuzzRuntimeFiles.cpp's program: (name, rank, shape, offset, bytes), region of 400 bytes.
RUNTIME_WEIGHTS = [("conv.weight", 4, [4, 2, 3, 3], 0, 288), ("conv.bias", 1, [4], 320, 8),
                   ("shape", 1, [2], 384, 16)]
RUNTIME_REGION = 400


def weights_fingerprint(weights, region):
    """include/memopt/Runtime/WeightsFile.h's FNV-1a over the weight table."""
    value = 0xcbf29ce484222325

    def add(data):
        nonlocal value
        for byte in data:
            value = ((value ^ byte) * 0x100000001b3) & 0xffffffffffffffff

    for name, rank, shape, offset, size in weights:
        add(name.encode() + b"\0")
        for number in [rank, *shape, offset, size]:
            add(struct.pack("<q", number))
    add(struct.pack("<q", region))
    return value


def runtime_seeds():
    for dtype in ["float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool"]:
        stream = io.BytesIO()
        np.save(stream, (np.arange(6) % 3).astype(dtype).reshape(2, 3))
        yield f"npy-{dtype}", b"\0" + stream.getvalue()
    stream = io.BytesIO()
    np.save(stream, np.array([1.0, np.nan, np.inf], np.float32))
    yield "npy-nonfinite", b"\0" + stream.getvalue()
    region = bytes(range(256)) + bytes(RUNTIME_REGION - 256)
    trailer = b"MEMOPTWT" + struct.pack(
        "<Qq", weights_fingerprint(RUNTIME_WEIGHTS, RUNTIME_REGION), RUNTIME_REGION)
    yield "weights-trailer", b"\1" + region + trailer
    yield "weights-bare", b"\1" + region


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--translate", help="memopt-translate, for the .mlir seeds of models")
    args = parser.parse_args(argv)

    def write(target, name, data):
        folder = os.path.join(args.out, target)
        os.makedirs(folder, exist_ok=True)
        mode = "w" if isinstance(data, str) else "wb"
        with open(os.path.join(folder, name), mode) as stream:
            stream.write(data)
        return os.path.join(folder, name)

    for name, model in onnx_seeds():
        path = write("fuzz-onnx-import", name + ".onnx", model.SerializeToString())
        if args.translate:
            proc = subprocess.run([args.translate, "--import-onnx", path],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"seed {name} does not import: {proc.stderr}")
            write("fuzz-mlir-passes", name + ".mlir", proc.stdout)
    for name, text in mlir_cases():
        write("fuzz-mlir-passes", name + ".mlir", text)
    for name, text in CSV_SEEDS.items():
        write("fuzz-planner-csv", name + ".csv", text)
    for name, data in runtime_seeds():
        write("fuzz-runtime-files", name, data)


if __name__ == "__main__":
    main()
