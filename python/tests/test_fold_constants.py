"""Ops of constants fold at import through the host kernels (docs/import.md, "Fold what is known
at compile time"; lib/Evaluate/HostEvaluator.cpp).

Shape-deciding inputs computed by ops that have no MLIR folder (ReduceMax, TopK, Einsum, ArgMax,
Softmax) import as constants, and the compiled host program matches onnxruntime. An op reading a
trained parameter stays an op, and so does one whose constant is larger than the limit
(--fold-limit-elements, 1 Mi elements by default).
"""

import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import _tool
from test_e2e_host import check_against_onnxruntime


def _const(name, values, dtype=np.float32):
    """A Constant node (not an initializer: nothing the importer could train)."""
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.array(values, dtype=dtype), name))


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "fold", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def shape_model():
    """Every shape below comes from an op without a folder, over constants."""
    nodes = [
        # Reshape's shape: the column maxima of an int64 table.
        _const("table", [[4, 1], [2, 3]], np.int64),
        helper.make_node("ReduceMax", ["table"], ["s1"], axes=[0], keepdims=0),
        helper.make_node("Reshape", ["x", "s1"], ["r1"]),
        helper.make_node("Relu", ["r1"], ["y1"]),
        # Slice's end: the largest score of TopK, cast to an integer.
        _const("scores", [0.5, 3.0, 2.0, 1.0]),
        _const("k", [1], np.int64),
        helper.make_node("TopK", ["scores", "k"], ["top", "top_index"]),
        helper.make_node("Cast", ["top"], ["end"], to=TensorProto.INT64),
        _const("start", [0], np.int64),
        _const("axis1", [1], np.int64),
        helper.make_node("Slice", ["x", "start", "end", "axis1"], ["y2"]),
        # Expand's shape: a matrix-vector product (Einsum) of constants.
        _const("m", [[1.0, 0.0], [1.0, -1.0]]),
        _const("v", [2.0, 0.0]),
        helper.make_node("Einsum", ["m", "v"], ["mv"], equation="ij,j->i"),
        helper.make_node("Cast", ["mv"], ["expand_shape"], to=TensorProto.INT64),
        helper.make_node("Expand", ["z", "expand_shape"], ["y3"]),
        # Gather's index: the ArgMax of constants; the gathered row is scaled by a softmax of
        # constants through a MatMul (no folder for either).
        _const("logits", [[0.1, 2.0, 0.3]]),
        helper.make_node("ArgMax", ["logits"], ["row"], axis=1, keepdims=0),
        helper.make_node("Gather", ["x", "row"], ["picked"], axis=0),
        helper.make_node("Softmax", ["logits"], ["p"], axis=1),
        helper.make_node("Transpose", ["p"], ["pt"], perm=[1, 0]),
        helper.make_node("MatMul", ["p", "pt"], ["pp"]),
        helper.make_node("Mul", ["picked", "pp"], ["y4"]),
        # A trained parameter ('w', no exporter mark) is read as it is, never folded.
        helper.make_node("ReduceSum", ["w", "axis1"], ["w_sum"], keepdims=1),
        helper.make_node("Add", ["x", "w_sum"], ["y5"]),
    ]
    w = numpy_helper.from_array(np.array([[0.5, -1.5, 2.0]] * 3, dtype=np.float32), "w")
    return _model(nodes, [_f32("x", [3, 4]), _f32("z", [1, 2])],
                  [_f32("y1", [4, 3]), _f32("y2", [3, 3]), _f32("y3", [2, 2]),
                   _f32("y4", [1, 4]), _f32("y5", [3, 4])], [w])


def translate(path, *extra):
    proc = subprocess.run([_tool("memopt-translate"), "--import-onnx", path, *extra],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def test_shapes_from_ops_without_folders(tmp_path):
    path = str(tmp_path / "shapes.onnx")
    onnx.save(shape_model(), path)
    ir = translate(path)
    for folded in ("reduce_max", "matmul", "softmax", "gather_elements"):
        assert f"memopt.{folded} " not in ir, ir
    assert "-> tensor<4x3xf32>" in ir and "-> tensor<2x2xf32>" in ir
    # The parameter's reduction stays.
    assert "memopt.reduce_sum" in ir, ir
    check_against_onnxruntime(_tool("memopt-compile"), path, str(tmp_path))


def test_size_limit(tmp_path):
    """A sigmoid of a 1100 x 1000 constant (more than 1 Mi elements) stays an op; raised limit
    folds it, into a dense_resource blob."""
    big = numpy_helper.from_array(
        np.linspace(-3, 3, 1100 * 1000, dtype=np.float32).reshape(1100, 1000), "val_big")
    nodes = [helper.make_node("Sigmoid", ["val_big"], ["s"]),
             helper.make_node("Add", ["x", "s"], ["y"])]
    path = str(tmp_path / "big.onnx")
    onnx.save(_model(nodes, [_f32("x", [1100, 1000])], [_f32("y", [1100, 1000])], [big]), path)
    assert "memopt.sigmoid" in translate(path)
    ir = translate(path, "--fold-limit-elements=2000000")
    assert "memopt.sigmoid" not in ir and "dense_resource<folded_" in ir


def test_compile_flag_turns_it_off(tmp_path):
    """memopt-compile --fold-limit-elements 0: the first shape no longer folds, and the error
    names the node and its input."""
    path = str(tmp_path / "shapes.onnx")
    onnx.save(shape_model(), path)
    proc = subprocess.run([_tool("memopt-compile"), path, "-o", str(tmp_path / "m"), "--emit",
                           "mlir", "--fold-limit-elements", "0"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "(Reshape): input 1 ('s1') decides a shape" in proc.stderr, proc.stderr[-2000:]
