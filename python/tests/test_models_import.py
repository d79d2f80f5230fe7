"""Imports every zoo model (both exporters) and the bundled model with memopt-translate, checks
the result with memopt-opt --verify-each --memopt-summary, and reports op counts and times.

Weights are not committed: fill_weights.py writes deterministic ones into tmp_path first.
Models whose graph uses an op outside memopt's supported list must be refused cleanly: a
non-zero exit and a message naming the op, not a crash.
"""

import filecmp
import os
import re
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import fill_weights
import memopt_tools
import supported_ops
import zoo
import tiers
from conftest import REPO, report

IMPORT_REPORT = report("import_report", "memopt import of the model zoo",
                       ["model", "onnx nodes", "memopt ops", "constants", "weights MiB",
                        "import s", "result"])
ALL_MODELS = [zoo.BUNDLED] + zoo.MODELS


def _path(model):
    return zoo.BUNDLED_PATH if model is zoo.BUNDLED else model.path


def _unsupported(graph):
    return sorted({n.op_type for n in graph.node if not supported_ops.is_supported(n.op_type,
                                                                                    n.domain)})


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.id)
def test_zoo_entry_matches_file(model):
    path = _path(model)
    assert os.path.isfile(path), f"{model.id}: {path} is missing"
    assert os.path.getsize(path) < 2 * 1024 * 1024, f"{path} is over 2 MB"
    graph_model = memopt_tools.load_graph(path)
    assert memopt_tools.default_opset(graph_model) == model.opset
    initializer_names = {t.name for t in graph_model.graph.initializer}
    inputs = {}
    for value in graph_model.graph.input:
        if value.name in initializer_names:
            continue
        dims = tuple(d.dim_value for d in value.type.tensor_type.shape.dim)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        inputs[value.name] = (dims, np.dtype(dtype).name)
    assert inputs == model.inputs
    for tensor in graph_model.graph.initializer:
        if tensor.data_location == TensorProto.EXTERNAL:
            location = {e.key: e.value for e in tensor.external_data}["location"]
            assert location == os.path.basename(path) + ".data", (tensor.name, location)
            assert tensor.data_type in fill_weights.FLOAT_TYPES, tensor.name
    if model is not zoo.BUNDLED:
        assert not os.path.exists(path + ".data"), "weights must not be committed"


def test_supported_ops_match_dialect_doc():
    with open(os.path.join(REPO, "docs", "dialect.md")) as stream:
        documented = supported_ops.dialect_ops_in_doc(stream.read())
    assert sorted(documented) == sorted(supported_ops.DIALECT_TO_ONNX)


def test_fill_weights_is_deterministic_and_complete(tmp_path):
    model = zoo.by_id("dynamo/bert_nn")
    first = fill_weights.fill(model.path, str(tmp_path / "a"))
    second = fill_weights.fill(model.path, str(tmp_path / "b"))
    data = os.path.basename(model.path) + ".data"
    assert filecmp.cmp(tmp_path / "a" / data, tmp_path / "b" / data, shallow=False)
    loaded = onnx.load(first)  # reads every external tensor back
    assert loaded.graph.initializer
    total, _ = memopt_tools.initializer_bytes(loaded)
    assert total > 10 * 1024 * 1024
    for tensor in loaded.graph.initializer:
        values = onnx.numpy_helper.to_array(tensor)
        assert np.all(np.isfinite(values)), tensor.name
    layer_norm_scales = [n.input[1] for n in loaded.graph.node
                         if n.op_type == "LayerNormalization"]
    by_name = {t.name: t for t in loaded.graph.initializer}
    assert layer_norm_scales
    for name in layer_norm_scales:
        assert np.all(onnx.numpy_helper.to_array(by_name[name]) == 1.0), name
    assert os.path.getsize(second) == os.path.getsize(model.path)


@pytest.mark.parametrize("model", tiers.params(
    ALL_MODELS, {m.id for m in ALL_MODELS} - tiers.LARGE_IMPORTS, id=lambda m: m.id))
def test_import(model, tools, tmp_path):
    source = _path(model)
    graph_model = memopt_tools.load_graph(source)
    unsupported = _unsupported(graph_model.graph)
    folder = tmp_path / "model"
    try:
        onnx_path = fill_weights.fill(source, str(folder))
        mlir_path = str(tmp_path / "imported.mlir")
        result = memopt_tools.translate(tools, onnx_path, mlir_path, model.input_shape_args())
        row = {"model": model.id, "onnx nodes": len(graph_model.graph.node),
               "import s": f"{result.seconds:.2f}"}
        IMPORT_REPORT["rows"].append(row)
        if unsupported:
            row["result"] = "refused: " + ",".join(unsupported)
            assert result.returncode == 1, result.describe("memopt-translate")
            assert any(re.search(rf"\b{op}\b", result.stderr) for op in unsupported), (
                f"the message should name one of {unsupported}:\n{result.stderr}")
            return
        row["result"] = "FAILED import"
        assert result.returncode == 0, result.describe("memopt-translate")

        opt, summary = memopt_tools.summarize(tools, mlir_path)
        row["result"] = "FAILED verify"
        assert opt.returncode == 0, opt.describe("memopt-opt --verify-each --memopt-summary")
        scanned = memopt_tools.scan_ir(mlir_path)
        row.update({"memopt ops": summary["ops"] - summary["constants"],
                    "constants": summary["constants"],
                    "weights MiB": f"{summary['weights_bytes'] / 2**20:.2f}"})
        row["result"] = "FAILED checks"
        assert summary["ops"] - summary["constants"] > 0
        # Every weight (initializer of more than 1024 elements, kept as dense_resource by the
        # dialect contract) arrives exactly once and with all of its bytes, unless the import
        # folded it into a constant of its own (swin_t's shifted-window masks and gathered
        # position biases: blobs `folded_*`, held whole too).
        total, large = memopt_tools.initializer_bytes(graph_model)
        assert scanned["blob_bytes"] == scanned["resource_constant_bytes"]
        assert scanned["folded_blob_bytes"] == scanned["folded_constant_bytes"]
        if scanned["folded_constant_bytes"]:
            assert scanned["resource_constant_bytes"] <= large
        else:
            assert scanned["resource_constant_bytes"] == large
        # The summary's weights_bytes counts every constant in the IR; small initializers that
        # decide shapes become attributes, so it is at least the weights and no more than the
        # weights plus what the IR's own small constants hold.
        assert summary["weights_bytes"] == scanned["constant_bytes"]
        assert summary["weights_bytes"] >= large
        if model is zoo.BUNDLED:
            # every initializer of the bundled CNN is a real weight: the equality is exact
            assert summary["weights_bytes"] == total
        row["result"] = "ok"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        for leftover in tmp_path.glob("*.mlir"):
            leftover.unlink()
