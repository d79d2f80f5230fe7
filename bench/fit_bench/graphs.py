"""Graphs for `--fit`: the exported graphs made batch-free, the Llama graph generated here.

`--fit` re-batches the model's inputs for every candidate micro-batch (docs/fit.md), but an
export bakes its batch into the Reshape targets (GPT-2's [4, 1024, 3072], ResNet-50's [64, 2048])
and such a candidate fails in the importer. `batch_free` rewrites those targets the way a
dynamic-batch export writes them: the leading dimension of every Reshape whose data depends on
a graph input and whose target starts with the batch (B) or the batch x sequence (B x S) becomes
-1; a -1 already in the target (GPT-2's [4, 1024, -1, 64]) is first resolved from the data's
inferred element count (ONNX allows one -1 per target). Reshapes of weights alone are left
alone. An Expand whose constant target starts with B gets 1 there (Expand broadcasts both
ways, so the output keeps the input's batch, and a [1, ...] mask broadcasts later). The
rewrite is a fixed point at the exported batch: the graph computes the same thing.
"""

import os

import numpy as np


def _tainted(graph):
    """Names of the values that depend on a graph input (data, not weights)."""
    initializers = {t.name for t in graph.initializer}
    tainted = {i.name for i in graph.input if i.name not in initializers}
    for node in graph.node:  # topological order (ONNX requires it)
        if any(name in tainted for name in node.input if name):
            tainted.update(node.output)
    return tainted


def _squeeze_batched_constants(graph, tainted, batch, base_dir):
    """A constant with the batch as its leading dimension whose slices along it are all equal
    (the exporter's folded causal-mask indices, GPT-2's int64 'index' [B, 1, S, 1] and
    'index_1' [B, 1, 1, S]) becomes its first slice, [1, ...]: it broadcasts over any batch.
    Float constants qualify only where they meet the data in a node (weights never do).
    Returns how many were replaced."""
    from onnx import external_data_helper, numpy_helper

    if batch <= 1:
        return 0
    mixes = set()
    for node in graph.node:
        if any(name in tainted for name in node.input if name):
            mixes.update(name for name in node.input if name and name not in tainted)
    replaced = 0
    for index, tensor in enumerate(list(graph.initializer)):
        dims = list(tensor.dims)
        integral = tensor.data_type not in (1, 10, 11, 16)  # float, f16, f64, bf16
        if len(dims) < 3 or dims[0] != batch or not (integral or tensor.name in mixes):
            continue
        if external_data_helper.uses_external_data(tensor):
            external_data_helper.load_external_data_for_tensor(tensor, base_dir)
        value = numpy_helper.to_array(tensor)
        if not all(np.array_equal(value[0], value[i]) for i in range(1, batch)):
            continue
        graph.initializer[index].CopyFrom(numpy_helper.from_array(
            np.ascontiguousarray(value[:1]), tensor.name))
        replaced += 1
    return replaced


def batch_free(src, dst, batch, seq=1):
    """Writes SRC's graph (no external data is read: the weights stay where they are, the
    .data file is linked beside DST) with batch-free Reshape targets to DST. Returns the
    number of targets rewritten."""
    import onnx
    from onnx import numpy_helper, shape_inference

    proto = onnx.load(src, load_external_data=False)
    inferred = shape_inference.infer_shapes(proto)
    shapes = {}
    for info in list(inferred.graph.value_info) + list(inferred.graph.input):
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in info.type.tensor_type.shape.dim]
        if dims and None not in dims:
            shapes[info.name] = dims
    graph = proto.graph
    tainted = _tainted(graph)
    initializers = {t.name: t for t in graph.initializer}
    constants = {n.output[0]: n for n in graph.node if n.op_type == "Constant"}
    consumers = {}
    for node in graph.node:
        for name in node.input:
            consumers[name] = consumers.get(name, 0) + 1
    leading = {batch, batch * seq}
    rewritten = 0
    for node in graph.node:
        expand = node.op_type == "Expand"
        if not expand and (node.op_type != "Reshape" or node.input[0] not in tainted):
            continue
        target_name = node.input[1]
        if target_name in initializers:
            target = numpy_helper.to_array(initializers[target_name]).astype(np.int64)
        elif target_name in constants:
            attrs = {a.name: a for a in constants[target_name].attribute}
            if "value" in attrs:
                target = numpy_helper.to_array(attrs["value"].t).astype(np.int64)
            elif "value_ints" in attrs:  # the exporter's 1-D form (llama_graph's too)
                target = np.array(list(attrs["value_ints"].ints), dtype=np.int64)
            else:
                continue
        else:
            continue  # computed at run time: already batch-free
        target = target.copy()
        if expand:
            # Expand broadcasts both ways: a target dimension of 1 keeps the input's, so
            # [B, ...] -> [1, ...] is the same op at every batch (Llama's mask and GQA expands).
            if target.ndim != 1 or not len(target) or int(target[0]) != batch or batch == 1:
                continue
            target[0] = 1
        elif target.ndim != 1 or not len(target) or int(target[0]) not in leading:
            continue
        elif (target == -1).any():
            data = shapes.get(node.input[0])
            if data is None:
                raise SystemExit(f"{src}: Reshape '{node.name}' has a -1 target {target.tolist()} "
                                 "and no inferred input shape to resolve it")
            known = int(np.prod([d for d in target if d != -1]))
            target[target == -1] = int(np.prod(data)) // known
        if not expand:
            target[0] = -1
        new_name = f"{target_name}__batch_free_{rewritten}"
        graph.initializer.append(numpy_helper.from_array(target, new_name))
        node.input[1] = new_name
        rewritten += 1
    rewritten += _squeeze_batched_constants(graph, tainted, batch, os.path.dirname(
        os.path.abspath(src)))
    # Targets no longer read by anyone are dropped by memopt's importer anyway; leave them.
    onnx.save_model(proto, dst)
    for tensor in graph.initializer:  # the weights file(s) beside the new graph
        for entry in tensor.external_data:
            if entry.key == "location":
                source = os.path.join(os.path.dirname(os.path.abspath(src)), entry.value)
                link = os.path.join(os.path.dirname(os.path.abspath(dst)), entry.value)
                if not os.path.exists(link) and os.path.abspath(source) != link:
                    os.symlink(source, link)
    return rewritten
