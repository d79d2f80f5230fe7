#!/usr/bin/env python3
"""Exports today's zoo: the architectures people train, exported the ordinary way.

Each model is built from a small config of its family (random init, fixed seed; transformers,
timm and torchvision) and exported with `torch.onnx.export(model, args, dynamo=True)` as a user
would. Text models are exported twice: with `input_ids` alone (transformers then builds the
position ids and the causal mask inside the graph) and with `input_ids` + a left-padded
`attention_mask`. Each export is saved as a graph file plus external data
(export_common.save_with_external_data); only graphs travel back, packed into
OUT/today_graphs.tar.gz with OUT/today_zoo.json, which records for every model:

  * its inputs (name, shape, dtype, how to make the value),
  * `parameters`: sum(p.numel() for p in model.parameters()), tied weights once, which is the
    number memopt's training step must train,
  * `parameter_names`: which initializers are the module's parameters (and which are buffers),
  * `reference`: PyTorch's own outputs with the weights python/models/fill_weights.py writes
    for that graph (each parameter and buffer of the module set from the filled initializer of
    the same name), on inputs drawn from a fixed seed: the first 64 values, the mean and the
    L2 norm of each output. Models whose parameters do not all appear under their own names
    get none (the log says why).

Float constants that are not module state (the exporter's lifted tensors) stay inline in the
graph, so fill_weights only ever invents values for parameters and buffers.

PyTorch, transformers and timm exist only on the device machine, so this runs there:
    python3 python/models/export_today.py --out $OUT
"""

import argparse
import json
import os
import sys
import tarfile
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import export_common  # noqa: E402
import fill_weights  # noqa: E402

BATCH, TOKENS, VOCAB = 2, 32, 1024
IMAGE = 64
# The exporter's optimizer (optimize=True, the default) constant-folds initializers: a Gather of
# position embeddings by constant positions becomes a constant, a weight's Transpose becomes a
# new `val_N` initializer, and parameters whose random init is trivial (RMSNorm's ones) fold
# away; the graph then no longer holds the module's parameters. The training zoo keeps them.
OPTIMIZE = False
PAD_STEP = 5  # sequence b of a masked batch starts with PAD_STEP * b padding tokens

# Small configs: two layers, hidden 64, four heads of 16 (two key/value heads where the family
# has grouped-query attention), so graphs are small and the host backend trains them in seconds.
SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
             vocab_size=VOCAB, max_position_embeddings=128)
GQA = dict(SMALL, num_key_value_heads=2)
DECODERS = {
    "gpt2": ("GPT2LMHeadModel", "GPT2Config",
             dict(n_embd=64, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=128)),
    "llama": ("LlamaForCausalLM", "LlamaConfig", GQA),
    "mistral": ("MistralForCausalLM", "MistralConfig", dict(GQA, sliding_window=16)),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", GQA),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", dict(GQA, head_dim=16)),
    "phi3": ("Phi3ForCausalLM", "Phi3Config", dict(GQA, pad_token_id=0)),
    "gemma": ("GemmaForCausalLM", "GemmaConfig", dict(GQA, head_dim=16)),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", dict(GQA, head_dim=16, sliding_window=16)),
    "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", SMALL),
    "opt": ("OPTForCausalLM", "OPTConfig",
            dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
                 word_embed_proj_dim=64, vocab_size=VOCAB, max_position_embeddings=128)),
    "falcon": ("FalconForCausalLM", "FalconConfig",
               dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                    vocab_size=VOCAB, new_decoder_architecture=True, num_kv_heads=2)),
    "bloom": ("BloomForCausalLM", "BloomConfig",
              dict(hidden_size=64, n_layer=2, n_head=4, vocab_size=VOCAB)),
    "gptj": ("GPTJForCausalLM", "GPTJConfig",
             dict(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, vocab_size=VOCAB,
                  n_positions=128)),
    "olmo2": ("Olmo2ForCausalLM", "Olmo2Config", GQA),
}
ENCODERS = {
    "bert": ("BertModel", "BertConfig", SMALL),
    "roberta": ("RobertaModel", "RobertaConfig", dict(SMALL, max_position_embeddings=130)),
    "distilbert": ("DistilBertModel", "DistilBertConfig",
                   dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=VOCAB,
                        max_position_embeddings=128)),
    "albert": ("AlbertModel", "AlbertConfig", dict(SMALL, embedding_size=32)),
    "electra": ("ElectraModel", "ElectraConfig", dict(SMALL, embedding_size=32)),
    "deberta_v2": ("DebertaV2Model", "DebertaV2Config", dict(SMALL, max_relative_positions=64)),
}
SEQ2SEQ = {
    "t5": ("T5ForConditionalGeneration", "T5Config",
           dict(d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4, d_kv=16,
                vocab_size=VOCAB)),
    "bart": ("BartForConditionalGeneration", "BartConfig",
             dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                  vocab_size=VOCAB, max_position_embeddings=128)),
}
HF_VISION = {
    "vit": ("ViTModel", "ViTConfig",
            dict(SMALL, image_size=IMAGE, patch_size=8, vocab_size=None)),
    "swin": ("SwinModel", "SwinConfig",
             dict(image_size=IMAGE, patch_size=4, embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                  window_size=4)),
    "convnextv2": ("ConvNextV2Model", "ConvNextV2Config",
                   dict(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, image_size=IMAGE)),
    "clip_vision": ("CLIPVisionModel", "CLIPVisionConfig",
                    dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=128, image_size=IMAGE, patch_size=8)),
    "segformer": ("SegformerModel", "SegformerConfig",
                  dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                       hidden_sizes=[16, 32], num_attention_heads=[1, 2], patch_sizes=[7, 3],
                       strides=[4, 2], mlp_ratios=[2, 2])),
}
SPEECH = {
    "wav2vec2": ("Wav2Vec2Model", "Wav2Vec2Config",
                 dict(SMALL, conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
                      num_feat_extract_layers=2, feat_extract_norm="group",
                      num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                      vocab_size=None)),
    "whisper": ("WhisperForConditionalGeneration", "WhisperConfig",
                dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                     num_mel_bins=16, max_source_positions=16, max_target_positions=64,
                     vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                     decoder_start_token_id=1)),
}
TIMM = ["convnextv2_atto", "poolformerv2_s12", "tf_efficientnetv2_b0", "deit_tiny_patch16_224",
        "regnety_002", "mobilevitv2_050"]
TORCHVISION = ["resnet18", "mobilenet_v3_small", "shufflenet_v2_x0_5", "densenet121",
               "regnet_y_400mf", "squeezenet1_1"]


def _names():
    names = []
    for arch in DECODERS:
        names += [f"{arch}", f"{arch}_mask"]
    for arch in ENCODERS:
        names += [f"{arch}", f"{arch}_mask"]
    names += list(SEQ2SEQ) + list(HF_VISION) + list(SPEECH)
    names += [f"timm_{n}" for n in TIMM] + [f"tv_{n}" for n in TORCHVISION]
    return names


ORDER = _names()


class _Outputs(torch.nn.Module):
    """Wraps a transformers model so the export has plain tensor outputs and named inputs."""

    def __init__(self, model, field, input_names):
        super().__init__()
        self.model = model
        self.field = field
        self.input_names = input_names

    def forward(self, *args):
        kwargs = dict(zip(self.input_names, args))
        if "use_cache" in self.model.forward.__code__.co_varnames:
            kwargs["use_cache"] = False
        return getattr(self.model(**kwargs, return_dict=True), self.field)


def left_padded_mask(batch, tokens):
    mask = np.ones((batch, tokens), dtype=np.int64)
    for b in range(batch):
        mask[b, :PAD_STEP * b] = 0
    return mask


def _inputs(spec, seed=0):
    """Input values from a spec {name: {shape, dtype, value}}: the same on every machine."""
    rng = np.random.default_rng(seed)
    values = {}
    for name, entry in spec.items():
        shape, kind = tuple(entry["shape"]), entry["value"]
        if kind == "tokens":
            values[name] = rng.integers(0, VOCAB, size=shape, dtype=np.int64)
        elif kind == "left_padded_mask":
            values[name] = left_padded_mask(*shape)
        else:
            values[name] = rng.standard_normal(shape).astype(np.float32)
    return values


def build(name):
    import transformers

    torch.manual_seed(0)
    arch = name[:-len("_mask")] if name.endswith("_mask") else name
    masked = name.endswith("_mask")
    text = {"shape": [BATCH, TOKENS], "dtype": "int64", "value": "tokens"}
    mask = {"shape": [BATCH, TOKENS], "dtype": "int64", "value": "left_padded_mask"}
    image = {"shape": [BATCH, 3, IMAGE, IMAGE], "dtype": "float32", "value": "normal"}
    if arch in DECODERS or arch in ENCODERS:
        cls, config_cls, kwargs = (DECODERS.get(arch) or ENCODERS[arch])
        config = getattr(transformers, config_cls)(**kwargs)
        model = getattr(transformers, cls)(config)
        spec = {"input_ids": text}
        if masked:
            spec["attention_mask"] = mask
        field = "logits" if arch in DECODERS else "last_hidden_state"
        family = "decoder" if arch in DECODERS else "encoder"
    elif arch in SEQ2SEQ:
        cls, config_cls, kwargs = SEQ2SEQ[arch]
        config = getattr(transformers, config_cls)(**kwargs)
        model = getattr(transformers, cls)(config)
        spec = {"input_ids": text,
                "decoder_input_ids": dict(text, shape=[BATCH, TOKENS // 2])}
        field, family = "logits", "encoder-decoder"
    elif arch in HF_VISION:
        cls, config_cls, kwargs = HF_VISION[arch]
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        config = getattr(transformers, config_cls)(**kwargs)
        model = getattr(transformers, cls)(config)
        spec = {"pixel_values": image}
        field = "pooler_output" if arch in ("convnextv2",) else "last_hidden_state"
        family = "vision"
    elif arch in SPEECH:
        cls, config_cls, kwargs = SPEECH[arch]
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        config = getattr(transformers, config_cls)(**kwargs)
        model = getattr(transformers, cls)(config)
        if arch == "wav2vec2":
            spec = {"input_values": {"shape": [BATCH, 1600], "dtype": "float32",
                                     "value": "normal"}}
            field = "last_hidden_state"
        else:
            spec = {"input_features": {"shape": [BATCH, 16, 32], "dtype": "float32",
                                       "value": "normal"},
                    "decoder_input_ids": dict(text, shape=[BATCH, 8])}
            field = "logits"
        family = "speech"
    elif arch.startswith("timm_"):
        import timm
        model = timm.create_model(arch[len("timm_"):], pretrained=False, num_classes=10,
                                  **({"img_size": IMAGE} if "deit" in arch else {}))
        return model.eval(), {"input": image}, ["output"], "vision"
    elif arch.startswith("tv_"):
        import torchvision
        model = getattr(torchvision.models, arch[len("tv_"):])(weights=None, num_classes=10)
        return model.eval(), {"input": image}, ["output"], "vision"
    else:
        raise KeyError(name)
    wrapper = _Outputs(model, field, list(spec))
    return wrapper.eval(), spec, [field], family


def parameter_names(model):
    """(parameter names, tied parameter names, buffer names) of the module's state."""
    seen, params, tied = {}, [], []
    for key, param in model.named_parameters(remove_duplicate=False):
        if param.data_ptr() in seen:
            tied.append(key)
        else:
            seen[param.data_ptr()] = key
            params.append(key)
    buffers = [key for key, _ in model.named_buffers()]
    return params, tied, buffers


def _tied_aliases(model):
    """parameter name -> the other names of the same tensor (tied weights)."""
    by_pointer = {}
    for key, param in model.named_parameters(remove_duplicate=False):
        by_pointer.setdefault(param.data_ptr(), []).append(key)
    return {key: [k for k in keys if k != key] for keys in by_pointer.values() for key in keys}


def _folded_from(proto):
    """initializer name -> the names its value was folded from (the exporter's optimizer
    records them on the value's metadata as `pkg.onnxscript.optimizer.folded_from`)."""
    lineage = {}
    for info in proto.graph.value_info:
        for prop in info.metadata_props:
            if prop.key == "pkg.onnxscript.optimizer.folded_from":
                lineage[info.name] = [n.strip(" '\"") for n in prop.value.strip("[]").split(",")]
    return lineage


def _state_values(proto, values, state_keys, state, aliases):
    """The value of each state tensor of the module that the graph holds: under its own name,
    under the name of a tied alias, or folded by the exporter's optimizer into one initializer
    of the same or transposed shape. Tensors the graph does not read (a pooler whose output is
    not exported, BatchNorm's num_batches_tracked) are left out."""
    lineage = _folded_from(proto)
    from_source = {}
    for name, sources in lineage.items():
        if name in values:
            for source in sources:
                from_source.setdefault(source, []).append(name)
    result = {}
    for key in state_keys:
        shape = tuple(state[key].shape)
        for alias in [key] + aliases.get(key, []):
            if alias in values:
                result[key] = values[alias]
                break
            for folded in from_source.get(alias, []):
                value = values[folded]
                if value.shape == shape:
                    result[key] = value
                elif value.ndim == 2 and value.shape[::-1] == shape:
                    result[key] = value.T
                if key in result:
                    break
            if key in result:
                break
    return result


def reference(model, graph_path, spec):
    """PyTorch's outputs with fill_weights' values, or None with the reason."""
    with tempfile.TemporaryDirectory() as scratch:
        filled = fill_weights.fill(graph_path, scratch, log=open(os.devnull, "w"))
        proto = onnx.load(filled)
    values = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    state = model.state_dict(keep_vars=True)
    params, tied, buffers = parameter_names(model)
    state_keys = [k for k in params + buffers if k in state]
    mapped = _state_values(proto, values, state_keys, state, _tied_aliases(model))
    if OPTIMIZE and len(mapped) < len([k for k in params if k in state]):
        return None, "the optimizer folded parameters the graph no longer names"
    with torch.no_grad():
        for key, value in mapped.items():
            state[key].copy_(torch.from_numpy(np.ascontiguousarray(value)).to(state[key].dtype))
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        feeds = _inputs(spec)
        outputs = model(*[torch.from_numpy(v) for v in feeds.values()])
    if isinstance(outputs, torch.Tensor):
        outputs = [outputs]
    result = []
    for out in outputs:
        array = out.detach().float().numpy()
        result.append({"shape": list(array.shape), "head": array.ravel()[:64].tolist(),
                       "mean": float(array.mean()), "l2": float(np.linalg.norm(array))})
    return result, None


def export(name, work):
    model, spec, output_names, family = build(name)
    feeds = _inputs(spec)
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    params, tied, buffers = parameter_names(model)
    # A network with batch normalization is exported for training (model.train()): in eval mode
    # the exporter folds each BatchNormalization into the convolution before it, and the
    # module's parameters are gone from the graph.
    if any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        model.train()
    path = os.path.join(work, f"{name}.onnx")
    with tempfile.TemporaryDirectory() as scratch:
        tmp = os.path.join(scratch, f"{name}.onnx")
        torch.onnx.export(model, args, tmp, dynamo=True, external_data=True, optimize=OPTIMIZE,
                          input_names=list(spec), output_names=output_names)
        proto = onnx.load(tmp)
    initializer_names = {t.name for t in proto.graph.initializer}
    inline = {t.name for t in proto.graph.initializer
              if t.name not in set(params + buffers) and len(t.raw_data) < (64 << 10)}
    sizes = export_common.save_with_external_data(proto, path, keep_inline=inline)
    entry = {
        "file": f"{name}.onnx", "family": family,
        "inputs": spec, "outputs": output_names,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "parameter_names": [p for p in params if p in initializer_names],
        # Parameters the exported outputs do not depend on (a pooler when the last hidden
        # state is the output) are not in the graph, so they cannot be trained through it.
        "parameters_in_graph": int(sum(
            p.numel() for key, p in model.named_parameters()
            if key in initializer_names or any(
                a in initializer_names for a in _tied_aliases(model).get(key, [])))),
        "parameters_not_in_graph": [p for p in params if p not in initializer_names],
        "buffer_names": [b for b in buffers if b in initializer_names],
        "tied": tied,
        "opset": next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")),
                      None),
        "ops": export_common.op_types(proto),
        "graph_bytes": sizes[0], "data_bytes": sizes[1],
    }
    entry["training_mode_export"] = model.training
    entry["folded_from"] = _folded_from(proto)
    ref, why = reference(model, path, spec)
    if ref is not None:
        entry["reference"] = ref
    else:
        entry["reference_missing"] = why
    # Export check: onnxruntime on PyTorch's own weights is not available after the fill, so
    # compare onnxruntime on the filled graph with the filled module's outputs.
    try:
        import onnxruntime as ort
        with tempfile.TemporaryDirectory() as scratch:
            filled = fill_weights.fill(path, scratch, log=open(os.devnull, "w"))
            session = ort.InferenceSession(filled, providers=["CPUExecutionProvider"])
            got = session.run(None, feeds)
        if ref is not None:
            errors = []
            for g, r in zip(got, ref):
                head = np.asarray(r["head"])
                errors.append(float(np.max(np.abs(g.ravel()[:64] - head)) /
                                    max(1e-12, np.max(np.abs(head)))))
            entry["onnxruntime_vs_torch"] = max(errors)
    except Exception as error:  # noqa: BLE001 - recorded, not fatal
        entry["onnxruntime_error"] = f"{type(error).__name__}: {str(error)[:500]}"
    return path, entry


def pack(out_dir, graphs, part_bytes=12 << 20):
    """Packs the graphs into today_graphs_N.tar.xz parts of at most `part_bytes` of graphs each
    (a device call brings back files of at most 16 MiB)."""
    parts, current, size = [], [], 0
    for graph in graphs:
        graph_size = os.path.getsize(graph)
        if current and size + graph_size > part_bytes:
            parts.append(current)
            current, size = [], 0
        current.append(graph)
        size += graph_size
    if current:
        parts.append(current)
    for index, part in enumerate(parts):
        with tarfile.open(os.path.join(out_dir, f"today_graphs_{index}.tar.xz"), "w:xz") as tar:
            for graph in part:
                tar.add(graph, arcname=os.path.basename(graph))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", nargs="*", default=ORDER)
    parser.add_argument("--budget-s", type=float, default=420.0,
                        help="start no new export after this many seconds")
    parser.add_argument("--optimize", action="store_true",
                        help="run the exporter's optimizer (its default), folding parameters")
    args = parser.parse_args(argv)
    global OPTIMIZE
    OPTIMIZE = args.optimize
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="today_export_")
    log = open(os.path.join(args.out, "today_export_log.txt"), "w")

    def say(text):
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()

    import transformers
    versions = {"torch": torch.__version__, "onnx": onnx.__version__,
                "transformers": transformers.__version__}
    for extra in ("timm", "torchvision", "onnxscript"):
        try:
            versions[extra] = __import__(extra).__version__
        except Exception:  # noqa: BLE001
            versions[extra] = None
    say(json.dumps(versions))
    zoo = {"versions": versions, "batch": BATCH, "tokens": TOKENS, "vocab": VOCAB,
           "image": IMAGE, "pad_step": PAD_STEP, "models": {}}
    start, graphs = time.time(), []
    for name in args.models:
        if time.time() - start > args.budget_s:
            say(f"SKIP {name}: time budget of {args.budget_s} s spent")
            continue
        begin = time.time()
        try:
            path, entry = export(name, work)
        except Exception as error:  # noqa: BLE001 - logged, the next model goes on
            say(f"FAIL {name}: {type(error).__name__}: {str(error)[:1500]}")
            log.write(traceback.format_exc()[-3000:] + "\n")
            continue
        graphs.append(path)
        zoo["models"][name] = entry
        with open(os.path.join(args.out, "today_zoo.json"), "w") as stream:
            json.dump(zoo, stream, indent=1)
        pack(args.out, graphs)
        ref = "reference" if "reference" in entry else f"no reference ({entry['reference_missing']})"
        say(f"ok   {name}: opset {entry['opset']}, {entry['parameters']} parameters, graph "
            f"{entry['graph_bytes']} B, {time.time() - begin:.1f} s, {ref}, ort/torch "
            f"{entry.get('onnxruntime_vs_torch', entry.get('onnxruntime_error'))}, ops "
            f"{','.join(entry['ops'])}")
    say(f"exported {len(graphs)}/{len(args.models)} in {time.time() - start:.1f} s")
    log.close()
    return 0 if graphs else 1


if __name__ == "__main__":
    sys.exit(main())
