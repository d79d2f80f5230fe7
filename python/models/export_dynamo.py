#!/usr/bin/env python3
"""Exports the model zoo with PyTorch 2.x's default ONNX exporter (torch.export / dynamo,
`torch.onnx.export(..., dynamo=True)`, opset 18), random weights, batch 1.

Same models as export_torchscript.py, plus transformers' GPT-2, BERT and Llama built from small
configs (random weights, transformers' default SDPA attention) when `transformers` imports. The
transformers models take `input_ids` and `attention_mask` (2 x 128, the second sequence
left-padded), so every attention is exported as SDPA with a boolean mask: onnxscript writes
`Softmax -> IsNaN -> Where(isnan, 0, P)`, PyTorch's safe softmax. `--check` compares each
transformers export under onnxruntime with PyTorch on a left-padded batch. Each model is saved as graph + external data
(export_common.save_with_external_data); the graph files alone (no .data) are packed into
OUT/dynamo_graphs.tar.gz, rewritten after every model so a time-out still leaves the finished
ones, and a log goes to OUT/export_log.txt.

PyTorch 2.x exists only on the device machine, so this runs there once:
    python3 python/models/export_dynamo.py --out $OUT/dynamo
`--legacy` uses the TorchScript exporter instead, to test this script's plumbing on PyTorch 1.x.
"""

import argparse
import os
import sys
import tarfile
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import onnx  # noqa: E402
import torch  # noqa: E402

import export_common  # noqa: E402
import nn_models  # noqa: E402
import zoo  # noqa: E402

HF_MODELS = ["hf_gpt2", "hf_bert", "hf_llama"]
ORDER = ["gpt2_nn", "bert_nn", "resnet50", "mobilenet_v3_large", "efficientnet_b0", "hf_gpt2",
         "hf_bert", "hf_llama", "convnext_tiny", "vit_b_16", "swin_t"]
HF_BATCH, HF_TOKENS, HF_VOCAB = 2, 128, 8192  # --hf-shape BxS changes the first two


class _LogitsOnly(torch.nn.Module):
    """Wraps a transformers model so the exported graph has plain tensor outputs."""

    def __init__(self, model, field):
        super().__init__()
        self.model = model
        self.field = field

    def forward(self, input_ids, attention_mask):
        kwargs = {"use_cache": False} if self.field == "logits" else {}
        return getattr(self.model(input_ids=input_ids, attention_mask=attention_mask,
                                  return_dict=True, **kwargs), self.field)


def build(name):
    if name not in HF_MODELS:
        return nn_models.build(name)
    import transformers

    torch.manual_seed(0)
    # transformers' default attention (SDPA); a GQA Llama as Llama 3 has (2 key/value heads
    # for 4 query heads).
    if name == "hf_gpt2":
        config = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=HF_VOCAB,
                                         n_positions=HF_TOKENS)
        model = _LogitsOnly(transformers.GPT2LMHeadModel(config), "logits")
        outputs = ["logits"]
    elif name == "hf_llama":
        config = transformers.LlamaConfig(hidden_size=256, intermediate_size=688,
                                          num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=2, vocab_size=HF_VOCAB,
                                          max_position_embeddings=HF_TOKENS)
        model = _LogitsOnly(transformers.LlamaForCausalLM(config), "logits")
        outputs = ["logits"]
    else:
        config = transformers.BertConfig(hidden_size=256, num_hidden_layers=2,
                                         num_attention_heads=4, intermediate_size=1024,
                                         vocab_size=HF_VOCAB, max_position_embeddings=HF_TOKENS)
        model = _LogitsOnly(transformers.BertModel(config), "last_hidden_state")
        outputs = ["last_hidden_state"]
    ids = torch.randint(0, HF_VOCAB, (HF_BATCH, HF_TOKENS), dtype=torch.int64)
    mask = torch.from_numpy(zoo.left_padded_mask((HF_BATCH, HF_TOKENS)))
    return model.eval(), (ids, mask), ["input_ids", "attention_mask"], outputs


def check(name, model, args, path):
    """Max |onnxruntime - PyTorch| / max |PyTorch| of the export (with its real weights)."""
    import numpy as np
    import onnxruntime as ort
    with torch.no_grad():
        expected = model(*args).numpy()
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)}
    got = session.run(None, feeds)[0]
    finite = bool(np.isfinite(got).all())
    scale = np.max(np.abs(expected))
    error = float(np.max(np.abs(got - expected)) / scale)
    # Padding positions (attention_mask 0) attend to no key under the causal mask: the ONNX
    # graph's safe softmax gives them zeros, PyTorch's CPU kernel may not; tokens are what
    # users read.
    tokens = args[1].numpy().astype(bool)
    token_error = float(np.max(np.abs(got - expected)[tokens]) / scale)
    return (f"check {name}: onnxruntime vs torch {token_error:.2e} relative on tokens, "
            f"{error:.2e} on all positions, all finite {finite}")


def export(name, out_dir, legacy, checks):
    model, args, input_names, output_names = build(name)
    path = os.path.join(out_dir, f"{name}.onnx")
    with tempfile.TemporaryDirectory() as scratch:
        tmp = os.path.join(scratch, f"{name}.onnx")
        if legacy:
            torch.onnx.export(model, args, tmp, opset_version=17, input_names=input_names,
                              output_names=output_names)
        else:
            torch.onnx.export(model, args, tmp, dynamo=True, external_data=True,
                              input_names=input_names, output_names=output_names)
        proto = onnx.load(tmp)
    sizes = export_common.save_with_external_data(proto, path)
    if name in HF_MODELS and checks is not None:
        checks.append(check(name, model, args, path))
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    return path, sizes, opset, export_common.op_types(proto)


def pack(out_dir, graphs):
    archive = os.path.join(out_dir, "dynamo_graphs.tar.gz")
    with tarfile.open(archive + ".tmp", "w:gz") as tar:
        for path in graphs:
            tar.add(path, arcname=os.path.basename(path))
    os.replace(archive + ".tmp", archive)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", nargs="*", default=ORDER)
    parser.add_argument("--budget-s", type=float, default=300.0,
                        help="start no new export after this many seconds")
    parser.add_argument("--legacy", action="store_true")
    parser.add_argument("--hf-shape", default=f"{HF_BATCH}x{HF_TOKENS}",
                        help="batch x tokens of the transformers exports (static shapes; the "
                             "zoo's are 2x128, the GPU benchmark's 8x512)")
    parser.add_argument("--check", action="store_true",
                        help="compare the transformers exports under onnxruntime with PyTorch")
    args = parser.parse_args(argv)
    global HF_BATCH, HF_TOKENS
    HF_BATCH, HF_TOKENS = (int(d) for d in args.hf_shape.split("x"))
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="dynamo_export_")
    log = open(os.path.join(args.out, "export_log.txt"), "w")

    def say(text):
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()

    say(f"torch {torch.__version__}, onnx {onnx.__version__}")
    try:
        import transformers
        say(f"transformers {transformers.__version__}")
        models = args.models
    except Exception as error:
        say(f"transformers does not import ({error}); skipping {HF_MODELS}")
        models = [m for m in args.models if m not in HF_MODELS]

    start = time.time()
    graphs = []
    for name in models:
        if time.time() - start > args.budget_s:
            say(f"SKIP {name}: time budget of {args.budget_s} s spent")
            continue
        begin = time.time()
        try:
            checks = [] if args.check else None
            path, (graph_bytes, data_bytes), opset, ops = export(name, work, args.legacy, checks)
        except Exception as error:
            say(f"FAIL {name}: {type(error).__name__}: {str(error)[:2000]}")
            log.write(traceback.format_exc()[-4000:] + "\n")
            continue
        graphs.append(path)
        pack(args.out, graphs)
        say(f"ok   {name}: opset {opset}, graph {graph_bytes} B, data {data_bytes} B, "
            f"{time.time() - begin:.1f} s, ops {','.join(ops)}")
        for line in checks or []:
            say(line)
    say(f"exported {len(graphs)}/{len(models)} in {time.time() - start:.1f} s")
    log.close()
    return 0 if graphs else 1


if __name__ == "__main__":
    sys.exit(main())
