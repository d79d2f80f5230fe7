"""Today's zoo (models/today, python/models/export_today.py): the architectures people train,
exported plainly with torch.onnx.export(dynamo=True), on the host backend.

Each model is filled with fill_weights.py's deterministic values, compiled with memopt-compile
--target host and run on the inputs its zoo.json entry describes (token ids from a fixed seed,
a left-padded attention mask, normal images); its outputs must match onnxruntime on the same
graph and, where the export recorded them, PyTorch's own outputs for the same weights.
"""

import json
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import fill_weights
import tiers
from conftest import REPO, _tool

TODAY_DIR = os.path.join(REPO, "models", "today")
with open(os.path.join(TODAY_DIR, "zoo.json")) as _stream:
    ZOO = json.load(_stream)
MODELS = ZOO["models"]
# Relative L2 error against onnxruntime, as the issue asks; PyTorch's reference is compared on
# its first 64 values with the same bound on their maximum.
RELATIVE_L2 = 1e-4

# Models that do not run yet, with the missing piece named; strict, so a fix must remove them.
EXPECTED_FAILURES = {
    "tv_mobilenet_v3_small": "exported in training mode: its classifier's dropout draws "
                             "random numbers (RandomUniformLike + Less), which onnxruntime "
                             "draws with another generator, so the outputs cannot agree",
}


def inputs_of(entry, seed=0):
    """The inputs export_today.py fed PyTorch (same seed and generator)."""
    rng = np.random.default_rng(seed)
    values = {}
    for name, spec in entry["inputs"].items():
        shape, kind = tuple(spec["shape"]), spec["value"]
        if kind == "tokens":
            values[name] = rng.integers(0, ZOO["vocab"], size=shape, dtype=np.int64)
        elif kind == "left_padded_mask":
            mask = np.ones(shape, dtype=np.int64)
            for b in range(shape[0]):
                mask[b, :ZOO["pad_step"] * b] = 0
            values[name] = mask
        else:
            values[name] = rng.standard_normal(shape).astype(np.float32)
    return values


def shape_args(entry):
    args = []
    for name, spec in entry["inputs"].items():
        args += ["--input-shape", f"{name}={'x'.join(str(d) for d in spec['shape'])}"]
    return args


def compile_host(model_path, out, entry, *extra, timeout=900):
    argv = [_tool("memopt-compile"), model_path, "-o", out, "--target", "host", "--quiet",
            *shape_args(entry), *extra]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(argv)}\n{proc.stderr[-4000:]}"
    return proc


def run_host(exe, values, folder):
    argv = [exe, "--weights", exe + ".weights", "--output-dir", folder]
    for name, value in values.items():
        path = os.path.join(folder, f"in_{name}.npy")
        np.save(path, value)
        argv += ["--input", f"{name}={path}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{exe} failed:\n{proc.stderr[-4000:]}"


def relative_l2(got, expected):
    scale = float(np.linalg.norm(expected))
    assert scale > 0, "the reference is all zeros"
    return float(np.linalg.norm(got.astype(np.float64) - expected)) / scale


@pytest.mark.parametrize("name", tiers.params(list(MODELS), tiers.TODAY,
                                              failures=EXPECTED_FAILURES))
def test_inference_matches_onnxruntime_and_pytorch(name, tmp_path):
    entry = MODELS[name]
    model_path = fill_weights.fill(os.path.join(TODAY_DIR, entry["file"]), str(tmp_path / "m"))
    values = inputs_of(entry)
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    expected = session.run(None, values)
    exe = str(tmp_path / "model")
    compile_host(model_path, exe, entry)
    run_host(exe, values, str(tmp_path))
    for output, reference in zip(session.get_outputs(), expected):
        got = np.load(str(tmp_path / f"{output.name}.npy"))
        assert got.shape == reference.shape, (output.name, got.shape, reference.shape)
        error = relative_l2(got, reference)
        assert error < RELATIVE_L2, f"{output.name}: relative L2 {error:.3g} against onnxruntime"
    # PyTorch's own outputs, where the export found onnxruntime agreeing with them (a network
    # exported in training mode normalizes by batch statistics in PyTorch, not in onnxruntime).
    if "reference" in entry and entry.get("onnxruntime_vs_torch", 1.0) < RELATIVE_L2:
        for output, reference in zip(session.get_outputs(), entry["reference"]):
            got = np.load(str(tmp_path / f"{output.name}.npy")).ravel()[:64]
            head = np.asarray(reference["head"])
            error = float(np.max(np.abs(got - head))) / float(np.max(np.abs(head)))
            assert error < RELATIVE_L2, f"{output.name}: {error:.3g} against PyTorch"


# ---------------------------------------------------------------------------------------------
# Training: the model's parameters, nothing else, and a loss that falls.
# ---------------------------------------------------------------------------------------------

# Models that do not train yet, with the missing piece named (strict). tv_mobilenet_v3_small
# trains with its exported dropout (memopt.random_uniform, keyed per step).
TRAIN_EXPECTED_FAILURES = {}


def loss_of(entry):
    """(loss, target values): cross-entropy on class logits ([B, classes] or [B, S, V] with
    random labels), mean squared error against a random target for hidden states."""
    rng = np.random.default_rng(7)
    shape = entry["reference"][0]["shape"] if "reference" in entry else None
    output = entry["outputs"][0]
    if output in ("logits", "output"):
        classes = shape[-1]
        return "cross-entropy", {"labels": rng.integers(0, classes, size=shape[:-1],
                                                        dtype=np.int64)}
    return "mse", {"target": rng.standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("name", tiers.params(list(MODELS), tiers.TODAY,
                                              failures=TRAIN_EXPECTED_FAILURES))
def test_trains_its_parameters(name, tmp_path):
    """The step trains exactly the module's parameters (PyTorch's count, tied weights once;
    buffers such as rotary frequencies and the exporter's constants are not trained), and 10
    AdamW steps on a fixed batch give finite losses that fall."""
    entry = MODELS[name]
    model_path = fill_weights.fill(os.path.join(TODAY_DIR, entry["file"]), str(tmp_path / "m"))
    loss, extra = loss_of(entry)
    exe = str(tmp_path / "step")
    report = str(tmp_path / "report.json")
    compile_host(model_path, exe, entry, "--train", "--loss", loss, "--optimizer", "adamw",
                 "--lr", "1e-3", "--report", report)
    with open(report) as stream:
        trained = json.load(stream)["training"]["parameters"]
    assert trained == entry["parameters_in_graph"], (
        f"trains {trained} elements; the module's parameters in the graph hold "
        f"{entry['parameters_in_graph']} (all parameters: {entry['parameters']})")
    values = dict(inputs_of(entry), **extra)
    argv = [exe, "--weights", exe + ".weights", "--steps", "10"]
    for input_name, value in values.items():
        path = str(tmp_path / f"in_{input_name}.npy")
        np.save(path, value)
        argv += ["--input", f"{input_name}={path}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{exe} failed:\n{proc.stderr[-4000:]}"
    losses = [float(line.split()[-1]) for line in proc.stdout.splitlines()
              if line.startswith("step ")]
    assert len(losses) == 10 and all(np.isfinite(losses)), losses
    assert losses[-1] < losses[0], losses


def test_default_export_trains_its_parameters_not_its_constants(tmp_path):
    """A default torch.onnx.export(dynamo=True) (its optimizer on: mask fill values, GELU's
    coefficients and the attention scale are `val_*` initializers) trains what the exporter's
    graph signature calls parameters, and SGD at lr 1e-2 stays finite (training the constants
    gave NaN at step 2)."""
    source = os.path.join(REPO, "models", "dynamo", "hf_gpt2.onnx")
    graph = onnx.load(source, load_external_data=False).graph
    kinds = {info.name: prop.value for info in graph.value_info for prop in info.metadata_props
             if prop.key == "pkg.torch.export.graph_signature.InputSpec.kind"}
    parameters = sum(int(np.prod(t.dims)) for t in graph.initializer
                     if kinds.get(t.name) == "PARAMETER")
    assert parameters > 0 and any(t.name.startswith("val_") for t in graph.initializer)
    model_path = fill_weights.fill(source, str(tmp_path / "m"))
    entry = {"inputs": {"input_ids": {"shape": [2, 128]}, "attention_mask": {"shape": [2, 128]}}}
    exe, report = str(tmp_path / "step"), str(tmp_path / "report.json")
    compile_host(model_path, exe, entry, "--train", "--loss", "cross-entropy", "--lr", "1e-2",
                 "--report", report)
    with open(report) as stream:
        assert json.load(stream)["training"]["parameters"] == parameters
    rng = np.random.default_rng(0)
    mask = np.ones((2, 128), np.int64)
    mask[1, :13] = 0
    values = {"input_ids": rng.integers(0, 8192, (2, 128)), "attention_mask": mask,
              "labels": rng.integers(0, 8192, (2, 128))}
    argv = [exe, "--weights", exe + ".weights", "--steps", "5"]
    for name, value in values.items():
        path = str(tmp_path / f"{name}.npy")
        np.save(path, value.astype(np.int64))
        argv += ["--input", f"{name}={path}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    losses = [float(line.split()[-1]) for line in proc.stdout.splitlines()
              if line.startswith("step ")]
    assert len(losses) == 5 and all(np.isfinite(losses)) and losses[-1] < losses[0], losses


def test_folded_parameters_whose_source_is_gone_are_trained(tmp_path):
    """The exporter's optimizer (on by default) folds each nn.Linear weight's Transpose into a
    `val_*` initializer whose `folded_from` names the parameter, and drops the parameter (and
    its ValueInfo) from the graph, as in every Llama export: `val_*` is still that parameter.
    A folded tensor from a constant-like name, and a scalar, stay constants."""
    from onnx import TensorProto, helper

    def tensor(name, dims, value):
        return helper.make_tensor(name, TensorProto.FLOAT, dims,
                                  np.full(dims, value, np.float32).ravel())

    def info(name, dims, **meta):
        vi = helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)
        for key, value in meta.items():
            entry = vi.metadata_props.add()
            entry.key, entry.value = key, value
        return vi

    folded = "pkg.onnxscript.optimizer.folded_from"
    kind = "pkg.torch.export.graph_signature.InputSpec.kind"
    nodes = [helper.make_node("MatMul", ["X", "val_3"], ["h"]),
             helper.make_node("MatMul", ["h", "val_5"], ["g"]),
             helper.make_node("Mul", ["g", "val_9"], ["s"]),
             helper.make_node("Add", ["s", "norm.weight"], ["Y"]),
             helper.make_node("ReduceSum", ["Y"], ["L"], keepdims=0)]
    graph = helper.make_graph(
        nodes, "folded", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("L", TensorProto.FLOAT, [])],
        [tensor("val_3", [8, 8], 0.1), tensor("val_5", [8, 8], 0.2),
         tensor("val_9", [], 0.5), tensor("norm.weight", [8], 1.0)],
        value_info=[info("val_3", [8, 8], **{folded: "['layers.0.q_proj.weight']"}),
                    info("val_5", [8, 8], **{folded: "['_tensor_constant3']"}),
                    info("norm.weight", [8], **{kind: "PARAMETER"})])
    path = str(tmp_path / "folded.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    report = str(tmp_path / "report.json")
    argv = [_tool("memopt-compile"), path, "--train", "--loss", "output", "--target", "host",
            "--emit", "plan", "-o", str(tmp_path / "plan.mlir"), "--report", report, "--quiet"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(report) as stream:
        assert json.load(stream)["training"]["parameters"] == 8 * 8 + 8


# ---------------------------------------------------------------------------------------------
# Attention fusion: every softmax over Q·Kᵀ becomes one memopt.attention (no S x S tensor).
# ---------------------------------------------------------------------------------------------

# Softmaxes that are not scaled dot-product attention.
NOT_ATTENTION = {
    "timm_mobilevitv2_050": "MobileViT-v2's separable self-attention: a softmax over one "
                            "context-score row per patch, no query-key product",
}
# Attention forms the fusion does not match yet (strict). None: BLOOM's ALiBi (scores over
# merged batch x heads, the alibi bias becomes the bias operand, the causal mask `causal`) and
# DeBERTa-v2 (K^T divided by Sqrt(d), P viewed back to [B*H, S, S]) fuse. The zoo's DeBERTa-v2
# config leaves relative_attention off, so its graph has no c2p / p2c score terms; that form
# (extra score terms added to the scores) is checked in test/Transforms/memopt-fuse-attention.mlir.
FUSION_EXPECTED_FAILURES = {}


ATTENTION_MODELS = [name for name, entry in MODELS.items()
                    if "Softmax" in entry["ops"] and name not in NOT_ATTENTION]


@pytest.mark.parametrize("name", tiers.params(ATTENTION_MODELS, set(ATTENTION_MODELS),
                                              failures=FUSION_EXPECTED_FAILURES))
def test_every_attention_fuses(name, tmp_path):
    entry = MODELS[name]
    model_path = fill_weights.fill(os.path.join(TODAY_DIR, entry["file"]), str(tmp_path / "m"))
    imported = subprocess.run([_tool("memopt-translate"), "--import-onnx", model_path,
                               *shape_args(entry)], capture_output=True, text=True, timeout=300)
    assert imported.returncode == 0, imported.stderr[-4000:]
    fused = subprocess.run([_tool("memopt-opt"), "--canonicalize", "--memopt-fuse-attention"],
                           input=imported.stdout, capture_output=True, text=True, timeout=300)
    assert fused.returncode == 0, fused.stderr[-4000:]
    attentions = fused.stdout.count("memopt.attention ")
    softmaxes = fused.stdout.count("memopt.softmax ")
    assert attentions > 0 and softmaxes == 0, (
        f"{attentions} memopt.attention ops, {softmaxes} softmaxes left unfused")


# ---------------------------------------------------------------------------------------------
# Gradients against onnxruntime-training: a decoder (grouped-query attention, rotary embeddings,
# padding mask), an encoder (hidden states against a regression target) and a convolutional
# network (BatchNormalization on batch statistics, as onnxruntime-training runs it).
# ---------------------------------------------------------------------------------------------

GRADIENT_MODELS = ["llama_mask", "bert_mask", "tv_resnet18"]


@pytest.mark.parametrize("name", GRADIENT_MODELS)
def test_gradients_match_onnxruntime_training(name, tmp_path):
    """One step at lr 0: memopt's loss and the gradient of every parameter it trains against
    onnxruntime-training's on the same graph and inputs (relative L2)."""
    import test_training as training

    entry = MODELS[name]
    model_path = fill_weights.fill(os.path.join(TODAY_DIR, entry["file"]), str(tmp_path / "m"))
    loss, extra = loss_of(entry)
    ((target_name, target),) = extra.items()
    inputs = {}
    for input_name, value in inputs_of(entry).items():
        inputs[input_name] = str(tmp_path / f"in_{input_name}.npy")
        np.save(inputs[input_name], value)
    target_path = str(tmp_path / f"{target_name}.npy")
    np.save(target_path, target)
    output = entry["outputs"][0]
    args = [*shape_args(entry), "--loss", loss, "--loss-output", output]
    if "BatchNormalization" in entry["ops"]:
        args.append("--bn-batch-stats")  # check_gradients' tolerance follows it
    training.check_gradients(tmp_path, model_path, loss, inputs, target_path, args,
                             output=output, labels_name=target_name)
