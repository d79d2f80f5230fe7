#!/usr/bin/env python3
"""Writes deterministic weights for a graph-only ONNX file, so models can be tested without
committing their weights.

The committed graphs (models/torchscript/*.onnx, models/dynamo/*.onnx) were saved with their
initializers as ONNX external data (`data_location: EXTERNAL`, with `location`, `offset`,
`length`), and the `.data` files were then dropped. This script copies the graph into a
destination folder and writes every referenced data file next to it, at the recorded offsets,
with values that depend only on the tensor's name (numpy's default_rng seeded by a CRC32 of the
name), so two runs give identical bytes.

Values are chosen by how the tensor is used, so the filled model computes something sane:
  * BatchNormalization scale -> 1, bias -> 0, mean -> N(0, 0.02), var -> U(0.5, 1.5)
  * LayerNormalization scale -> 1, bias -> 0
  * Conv weights -> He-scaled N(0, 2 / fan_in); Gemm/MatMul weights (rank 2, second operand)
    -> N(0, 1 / fan_in), so deep stacks (whose BatchNorm the exporters folded into the convs)
    keep activations of order one instead of vanishing
  * every other float tensor (embeddings, biases) -> N(0, 0.02), GPT-2's initialiser
  * integer or bool tensors (the exporters keep those inline; this is a fallback) -> zeros,
    with a warning, since their meaning (indices, shapes, masks) cannot be guessed.

Usage: fill_weights.py GRAPH.onnx DEST_DIR   (prints the path of the copied graph)
"""

import argparse
import os
import shutil
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper

FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}


def _external_info(tensor):
    info = {entry.key: entry.value for entry in tensor.external_data}
    return info["location"], int(info.get("offset", 0)), info.get("length")


def _roles(graph):
    """Maps initializer name -> (consumer op type, input index, node) of its first consumer."""
    roles = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            roles.setdefault(name, (node.op_type, index, node))
    return roles


def _values(tensor, role, node):
    shape = tuple(tensor.dims)
    rng = np.random.default_rng(zlib.crc32(tensor.name.encode("utf-8")))
    op_type, index = role[:2] if role else (None, None)
    if op_type == "BatchNormalization":
        if index == 1:
            return np.ones(shape)
        if index == 2:
            return np.zeros(shape)
        if index == 3:
            return rng.normal(0.0, 0.02, size=shape)
        if index == 4:
            return rng.uniform(0.5, 1.5, size=shape)
    if op_type == "LayerNormalization":
        if index == 1:
            return np.ones(shape)
        if index == 2:
            return np.zeros(shape)
    if op_type in ("Conv", "ConvTranspose") and index == 1 and len(shape) >= 3:
        fan_in = int(np.prod(shape[1:]))
        return rng.normal(0.0, np.sqrt(2.0 / fan_in), size=shape)
    if op_type in ("Gemm", "MatMul") and index == 1 and len(shape) == 2:
        transposed = op_type == "Gemm" and any(
            a.name == "transB" and a.i == 1 for a in node.attribute)
        fan_in = shape[1] if transposed else shape[0]
        return rng.normal(0.0, np.sqrt(1.0 / fan_in), size=shape)
    return rng.normal(0.0, 0.02, size=shape)


def tensor_bytes(tensor):
    """The byte size of an initializer's data, whether inline or external."""
    count = int(np.prod(tensor.dims, dtype=np.int64)) if tensor.dims else 1
    if tensor.data_type == TensorProto.STRING:
        return sum(len(s) for s in tensor.string_data)
    np_type = helper.tensor_dtype_to_np_dtype(tensor.data_type)
    return count * np.dtype(np_type).itemsize


def fill(graph_path, dest_dir, log=sys.stderr):
    model = onnx.load(graph_path, load_external_data=False)
    roles = _roles(model.graph)
    os.makedirs(dest_dir, exist_ok=True)
    dest_graph = os.path.join(dest_dir, os.path.basename(graph_path))
    if os.path.abspath(dest_graph) != os.path.abspath(graph_path):
        shutil.copyfile(graph_path, dest_graph)

    files = {}
    for tensor in model.graph.initializer:
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        location, offset, length = _external_info(tensor)
        if os.path.isabs(location) or ".." in location.split("/"):
            raise ValueError(f"{graph_path}: initializer '{tensor.name}' has unsafe location "
                             f"'{location}'")
        np_type = helper.tensor_dtype_to_np_dtype(tensor.data_type)
        if tensor.data_type in FLOAT_TYPES:
            role = roles.get(tensor.name)
            values = _values(tensor, role, role[2] if role else None).astype(np_type)
        else:
            print(f"warning: {graph_path}: external non-float initializer '{tensor.name}' "
                  f"({TensorProto.DataType.Name(tensor.data_type)}) filled with zeros", file=log)
            values = np.zeros(tuple(tensor.dims), dtype=np_type)
        data = values.tobytes()
        if length is not None and int(length) != len(data):
            raise ValueError(f"{graph_path}: initializer '{tensor.name}' records length {length} "
                             f"but its shape and type need {len(data)} bytes")
        files.setdefault(location, []).append((offset, data))

    for location, chunks in files.items():
        size = max(offset + len(data) for offset, data in chunks)
        buffer = bytearray(size)
        for offset, data in chunks:
            buffer[offset:offset + len(data)] = data
        path = os.path.join(dest_dir, location)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as stream:
            stream.write(buffer)
    return dest_graph


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", help="graph-only .onnx that references external data")
    parser.add_argument("dest", help="folder to write the graph and its data into")
    args = parser.parse_args(argv)
    print(fill(args.graph, args.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
