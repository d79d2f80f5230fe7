"""Gradient oracle: loss and parameter gradients from onnxruntime-training.

Runs inside the virtual environment that scripts/setup.sh makes for
onnxruntime-training-cpu (it ships its own `onnxruntime` module, so it cannot
share an environment with the inference oracle). Its `onnxruntime.training`
package imports torch when imported; this script loads the `artifacts` and
`api` submodules without running that package's `__init__`.

    python ort_training_oracle.py MODEL.onnx --loss cross-entropy|mse \
        --input NAME=X.npy ... --labels Y.npy --out DIR [--trainable NAMES]

writes DIR/loss.npy and DIR/grad/<parameter>.npy (one per trainable float
initializer) for one step at the model's initial weights.
"""

import argparse
import importlib.util
import os
import sys
import tempfile
import types

import numpy as np
import onnx
import onnx.numpy_helper


def load_training_modules():
    """Imports onnxruntime.training.{artifacts,api} without its __init__."""
    spec = importlib.util.find_spec("onnxruntime")
    root = os.path.join(os.path.dirname(spec.origin), "training")
    package = types.ModuleType("onnxruntime.training")
    package.__path__ = [root]
    sys.modules["onnxruntime.training"] = package
    import onnxruntime.training.artifacts as artifacts  # noqa: E402
    import onnxruntime.training.api as api  # noqa: E402

    return artifacts, api


def make_differentiable(model):
    """Rewrites the graph into the same function in ops onnxruntime-training can
    differentiate: HardSwish(x) = x * Clip(x / 6 + 1/2, 0, 1) and HardSigmoid(x) =
    Clip(alpha x + beta, 0, 1) (it has gradients for neither, but for Clip), and gives
    LayerNormalization its optional Mean / InvStdDev outputs, which its gradient reads.
    CastLike(x, like) becomes Cast(x, to = like's element type) (torch.onnx's dynamo exports
    use CastLike; onnxruntime-training has a gradient for Cast only)."""
    graph = model.graph
    constants = {}
    element_types = {}
    if any(node.op_type == "CastLike" for node in graph.node):
        inferred = onnx.shape_inference.infer_shapes(model).graph
        for value in list(inferred.input) + list(inferred.value_info) + list(inferred.output):
            if value.type.HasField("tensor_type"):
                element_types[value.name] = value.type.tensor_type.elem_type
        for tensor in graph.initializer:
            element_types[tensor.name] = tensor.data_type

    def scalar(value):
        name = f"oracle.scalar{len(constants)}"
        constants[name] = onnx.numpy_helper.from_array(np.array(value, np.float32), name)
        return name

    nodes = []
    for index, node in enumerate(graph.node):
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        prefix = f"oracle.{index}"
        if node.op_type in ("HardSwish", "HardSigmoid") and node.domain in ("", "ai.onnx"):
            alpha = attrs.get("alpha", 1 / 6 if node.op_type == "HardSwish" else 0.2)
            beta = attrs.get("beta", 0.5)
            x = node.input[0]
            nodes.append(onnx.helper.make_node("Mul", [x, scalar(alpha)], [prefix + ".ax"]))
            nodes.append(onnx.helper.make_node("Add", [prefix + ".ax", scalar(beta)],
                                               [prefix + ".axb"]))
            clipped = node.output[0] if node.op_type == "HardSigmoid" else prefix + ".gate"
            nodes.append(onnx.helper.make_node("Clip", [prefix + ".axb", scalar(0.0),
                                                        scalar(1.0)], [clipped]))
            if node.op_type == "HardSwish":
                nodes.append(onnx.helper.make_node("Mul", [x, clipped], [node.output[0]]))
            continue
        if node.op_type == "CastLike" and node.domain in ("", "ai.onnx"):
            if node.input[1] not in element_types:
                raise SystemExit(f"CastLike node {node.name}: the type of {node.input[1]} "
                                 f"is unknown")
            nodes.append(onnx.helper.make_node("Cast", [node.input[0]], list(node.output),
                                               name=node.name,
                                               to=element_types[node.input[1]]))
            continue
        if node.op_type == "LayerNormalization" and len(node.output) == 1:
            node.output.extend([prefix + ".mean", prefix + ".inv_std_dev"])
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(constants.values())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--loss", choices=["cross-entropy", "mse"], required=True)
    parser.add_argument("--input", action="append", default=[])
    parser.add_argument("--labels", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--trainable", default="",
                        help="comma-separated names (default: every float initializer)")
    parser.add_argument("--output", default="",
                        help="the output the loss reads (default: the only output)")
    args = parser.parse_args()

    artifacts, api = load_training_modules()
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)
    onnxruntime.set_default_logger_verbosity(0)
    model = onnx.load(args.model)
    if model.ir_version > 10:
        model.ir_version = 10
    floats = [t.name for t in model.graph.initializer
              if t.data_type == onnx.TensorProto.FLOAT]
    trainable = [n for n in args.trainable.split(",") if n] or floats
    # One output: the one the loss reads. onnxruntime-training's
    # cross-entropy takes classes on axis 1, memopt's (PyTorch's language
    # model convention) on the last axis: logits of rank > 2 are flattened to
    # [rows, classes] and the labels to [rows], which is the same loss.
    outputs = list(model.graph.output)
    chosen = [o for o in outputs if o.name == args.output] if args.output else outputs
    if len(chosen) != 1:
        raise SystemExit(f"choose one output with --output (have {[o.name for o in outputs]})")
    del model.graph.output[:]
    model.graph.output.append(chosen[0])
    make_differentiable(model)
    dims = chosen[0].type.tensor_type.shape.dim
    if args.loss == "cross-entropy" and len(dims) > 2:
        classes = dims[-1].dim_value
        shape = onnx.numpy_helper.from_array(np.array([-1, classes], np.int64),
                                             "oracle.flatten_shape")
        model.graph.initializer.append(shape)
        flat = chosen[0].name + ".oracle_flat"
        model.graph.node.append(onnx.helper.make_node(
            "Reshape", [chosen[0].name, shape.name], [flat]))
        del model.graph.output[:]
        model.graph.output.append(onnx.helper.make_tensor_value_info(
            flat, onnx.TensorProto.FLOAT, [None, classes]))
    frozen = [n for n in floats if n not in trainable]
    loss = (artifacts.LossType.CrossEntropyLoss if args.loss == "cross-entropy"
            else artifacts.LossType.MSELoss)
    inputs = {}
    for spec in args.input:
        name, path = spec.split("=", 1)
        inputs[name] = np.load(path)
    labels = np.load(args.labels)
    if args.loss == "cross-entropy":
        labels = labels.reshape(-1)

    with tempfile.TemporaryDirectory() as folder:
        artifacts.generate_artifacts(
            model, requires_grad=trainable, frozen_params=frozen, loss=loss,
            optimizer=artifacts.OptimType.AdamW, artifact_directory=folder)
        state = api.CheckpointState.load_checkpoint(
            os.path.join(folder, "checkpoint"))
        module = api.Module(os.path.join(folder, "training_model.onnx"), state,
                            os.path.join(folder, "eval_model.onnx"))
        module.train()
        feed = [inputs[i.name] for i in model.graph.input
                if i.name in inputs] + [labels]
        loss_value = module(*feed)
        os.makedirs(os.path.join(args.out, "grad"), exist_ok=True)
        np.save(os.path.join(args.out, "loss.npy"),
                np.asarray(loss_value, dtype=np.float32))
        for name in trainable:
            grad = state.parameters[name].grad
            np.save(os.path.join(args.out, "grad", name + ".npy"), grad)


if __name__ == "__main__":
    main()
