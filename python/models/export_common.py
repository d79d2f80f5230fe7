"""Saving an exported model as a graph file plus one external-data file.

Float initializers of at least SIZE_THRESHOLD bytes go to `<name>.onnx.data`; integer and bool
initializers (indices, shapes, masks, whose values fill_weights.py could not invent) are kept
inline in the graph whatever their size. Works with onnx 1.12 (the distro's, used by the
TorchScript exporter) and current onnx (the device machine's, used by the dynamo exporter).
"""

import os

import onnx
from onnx import TensorProto, helper, numpy_helper

SIZE_THRESHOLD = 1024
FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}


def _keep_inline(tensor):
    """Moves a non-float tensor's bytes from raw_data into its typed field, which onnx's
    external-data conversion leaves alone (it only moves raw_data)."""
    array = numpy_helper.to_array(tensor)
    if tensor.data_type == TensorProto.BOOL:
        values = array.astype("int32").flatten().tolist()
    else:
        values = array.flatten().tolist()
    replacement = helper.make_tensor(tensor.name, tensor.data_type, list(tensor.dims), values,
                                     raw=False)
    tensor.CopyFrom(replacement)


def save_with_external_data(model, path, keep_inline=()):
    """Saves `model` (all data loaded) to `path` + `path`.data; returns (graph bytes, data bytes).
    Initializers named in `keep_inline` stay in the graph whatever their type and size."""
    for tensor in model.graph.initializer:
        if ((tensor.data_type not in FLOAT_TYPES or tensor.name in keep_inline)
                and tensor.HasField("raw_data")):
            _keep_inline(tensor)
    location = os.path.basename(path) + ".data"
    data_path = os.path.join(os.path.dirname(os.path.abspath(path)), location)
    if os.path.exists(data_path):
        os.remove(data_path)  # onnx appends to an existing data file
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=SIZE_THRESHOLD)
    data_size = os.path.getsize(data_path) if os.path.exists(data_path) else 0
    return os.path.getsize(path), data_size


def op_types(model):
    return sorted({node.op_type for node in model.graph.node})
