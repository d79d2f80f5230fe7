"""Runs memopt's command-line tools and reads what they print, for the pytest suite."""

import os
import re
import subprocess
import time
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

# Bits per element of the MLIR element types memopt uses (i1 is stored in a byte).
_ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "ui64": 8, "i32": 4,
                  "ui32": 4, "i16": 2, "ui16": 2, "i8": 1, "ui8": 1, "i1": 1}


@dataclass
class ToolResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def describe(self, what):
        return (f"{what} exited with {self.returncode}\n--- stderr ---\n{self.stderr[-4000:]}"
                f"\n--- stdout (tail) ---\n{self.stdout[-2000:]}")


def run(argv, timeout=300):
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return ToolResult(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start)


def translate(tools, onnx_path, out_path, shape_args=()):
    return run([tools.translate, "--import-onnx", onnx_path, *shape_args, "-o", out_path])


def summarize(tools, mlir_path):
    """memopt-opt --verify-each --memopt-summary; returns (ToolResult, parsed summary or None)."""
    result = run([tools.opt, "--verify-each", "--memopt-summary", mlir_path, "-o", os.devnull])
    return result, (parse_summary(result.stdout) if result.returncode == 0 else None)


def parse_summary(text):
    """Reads the first function's block printed by --memopt-summary."""
    ops = re.search(r"^\s*ops: (\d+) \((\d+) kinds\)", text, re.M)
    weights = re.search(r"^\s*weights_bytes: (\d+)", text, re.M)
    tensors = re.search(r"^\s*tensors: (\d+) constants, (\d+) activations", text, re.M)
    activation = re.search(r"^\s*activation_bytes: (\d+)", text, re.M)
    if not (ops and weights and tensors and activation):
        raise AssertionError(f"cannot parse --memopt-summary output:\n{text[:2000]}")
    return {"ops": int(ops.group(1)), "kinds": int(ops.group(2)),
            "constants": int(tensors.group(1)), "activations": int(tensors.group(2)),
            "weights_bytes": int(weights.group(1)),
            "activation_bytes": int(activation.group(1))}


def tensor_type_bytes(type_text):
    """Bytes of an MLIR `tensor<AxBxf32>` type (as the summary counts them)."""
    match = re.fullmatch(r"tensor<(?:([0-9x]+)x)?([a-z0-9]+)>", type_text)
    if not match:
        raise AssertionError(f"unexpected tensor type {type_text}")
    dims = [int(d) for d in match.group(1).split("x")] if match.group(1) else []
    return int(np.prod(dims, dtype=np.int64)) * _ELEMENT_BYTES[match.group(2)]


_CONSTANT = re.compile(r"memopt\.constant\s+(?:\{[^}]*\}\s+)?(dense_resource<[^>]*>|.*?)\s*:\s*(tensor<[^>]*>)\s*$")
_BLOB = re.compile(r'^\s*("?[^"\s:]+"?|"[^"]*")\s*:\s*"0x([0-9A-Fa-f]*)"')


def scan_ir(mlir_path):
    """Streams the printed IR: bytes of constants, of dense_resource constants, of resource
    blobs (payload after the 4-byte alignment prefix), and the number of blobs. Blobs the
    constant evaluator made (keys `folded_*`: a large folded result, not an initializer) are
    counted apart, in `folded_constant_bytes` and `folded_blob_bytes`."""
    constants = resource_constants = blob_bytes = blobs = 0
    folded_constants = folded_blob_bytes = 0
    in_resources = False
    with open(mlir_path, "r") as stream:
        for line in stream:
            if not in_resources:
                if line.startswith("{-#"):
                    in_resources = True
                    continue
                if "memopt.constant" in line:
                    match = _CONSTANT.search(line)
                    if not match:
                        raise AssertionError(f"cannot read constant: {line[:300]}")
                    size = tensor_type_bytes(match.group(2))
                    constants += size
                    if match.group(1).startswith("dense_resource<folded_"):
                        folded_constants += size
                    elif match.group(1).startswith("dense_resource<"):
                        resource_constants += size
            else:
                match = _BLOB.match(line)
                if match:
                    blobs += 1
                    size = len(match.group(2)) // 2 - 4
                    if match.group(1).strip('"').startswith("folded_"):
                        folded_blob_bytes += size
                    else:
                        blob_bytes += size
    return {"constant_bytes": constants, "resource_constant_bytes": resource_constants,
            "blob_bytes": blob_bytes, "blobs": blobs,
            "folded_constant_bytes": folded_constants, "folded_blob_bytes": folded_blob_bytes}


def initializer_bytes(model):
    """(all, large) bytes of the initializers that some node uses; `large` counts those of
    more than 1024 elements, which the dialect contract keeps as dense_resource weights, except
    bool tensors (masks): MLIR stores i1 bit-packed and has no dense_resource blob for it, so
    the importer keeps them inline."""
    used = {name for node in model.graph.node for name in node.input}
    total = large = 0
    for tensor in model.graph.initializer:
        if tensor.name not in used:
            continue
        count = int(np.prod(tensor.dims, dtype=np.int64)) if tensor.dims else 1
        size = count * np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
        total += size
        if count > 1024 and tensor.data_type != TensorProto.BOOL:
            large += size
    return total, large


def default_opset(model):
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    return None


def load_graph(path):
    return onnx.load(path, load_external_data=False)


TENSOR_TYPE_NAMES = {value: name for name, value in TensorProto.DataType.items()}
