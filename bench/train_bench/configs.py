"""The benchmark's configurations and what every phase shares: the bench and gradient-check
tables, the optimizers' flags, the precisions, the carry's file names, the budget arithmetic,
the input batch and the PyTorch models (export and the baselines)."""

import os
import re
import sys

# This package: bench/train_bench, or its copy in a carry folder (CARRY/train_bench).
PACKAGE = os.path.dirname(os.path.abspath(__file__))
# The command line next to it (bench/train_bench.py, CARRY/train_bench.py): child processes
# (export-one, torch-one, torch-curve) run it.
SCRIPT = os.path.join(os.path.dirname(PACKAGE), "train_bench.py")
# The checkout above the entry point's folder (on the device: the one the carry lies in).
REPO = os.path.dirname(os.path.dirname(PACKAGE))
sys.path.insert(0, os.path.join(REPO, "python", "models"))
sys.path.insert(0, os.path.join(REPO, "bench"))

SEED = 1  # --random-weights and the input generator
# name: (model, batch, image size or sequence length, classes or vocabulary)
BENCH = {
    "resnet50_b64": ("resnet50", 64, 224, 1000),
    "vit_b_16_b32": ("vit_b_16", 32, 224, 1000),
    "gpt2_b8": ("gpt2", 8, 512, 50257),
    # Issue 24's GPU check: exported plainly (transformers' default attention, the exporter's
    # default optimizer), bf16 AdamW at 4 x 1024 tokens.
    "gpt2_medium_b4": ("gpt2_medium", 4, 1024, 50257),
    "llama_1b_b4": ("llama_1b", 4, 1024, 32000),
}
# Small configurations for the CUDA-vs-host gradient check (one SGD-momentum step).
CHECKS = {
    "tiny_convnet": ("tiny_convnet", 1, 32, 10),
    "resnet50_b2_64px": ("resnet50", 2, 64, 1000),
    "vit_tiny_b2": ("vit_tiny", 2, 32, 10),
    "gpt2_tiny_b2": ("gpt2_tiny", 2, 64, 512),
}
OPTIMIZERS = {
    "sgd": ["--optimizer", "sgd", "--lr", "0.001", "--momentum", "0.9"],
    "adamw": ["--optimizer", "adamw", "--lr", "0.0001", "--weight-decay", "0.01"],
}
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
TF32_SETTINGS = ("off", "on", "default")  # PyTorch's: set both switches, or leave its defaults


def precision_suffix(precision):
    """The carry's file names: NAME.OPT[.tf32|.fp16|.bf16] (fp32 keeps the plain name)."""
    return "" if precision in (None, "fp32") else "." + precision


def remat_suffix(fraction):
    """The carry's names of a program compiled under a budget (issue 17): NAME.OPT[.PREC]
    .rematPCT, PCT = the fraction in percent, a decimal point written p (0.125 -> remat12p5)."""
    return ".remat" + f"{fraction * 100:g}".replace(".", "p")


def remat_budget(report, fraction):
    """--memory-budget for `fraction` of memopt's own unconstrained activation arena.
    --memory-budget bounds the packed arena alone (docs/remat.md, "budget= vs memory-budget="):
    the weight region (parameters, optimizer state, BN statistics, constants) is outside it
    and not counted. What the arena holds at its peak besides activations (saved for backward,
    temporaries, workspaces) are the gradients still alive there (fused updates free the
    others at once): training.gradient_bytes_at_peak of the unconstrained compile's report.
    So activation arena A = arena_bytes - gradient_bytes_at_peak, and the budget is
    gradient_bytes_at_peak + fraction x A (inference reports: A = arena_bytes)."""
    arena = int(report["arena_bytes"])
    gradients = int((report.get("training") or {}).get("gradient_bytes_at_peak", 0))
    activations = arena - gradients
    return {"fraction": fraction, "budget_bytes": gradients + int(fraction * activations),
            "unconstrained_arena_bytes": arena, "gradient_bytes_at_peak": gradients,
            "activation_arena_bytes": activations}


def parse_remat_failure(message):
    """The smallest arena an infeasible --memory-budget reached, from memopt-compile's one
    error line ("the smallest arena reached (N ops recomputed) is X (B bytes)")."""
    found = re.search(r"smallest arena reached \((\d+) ops? recomputed\) is [^(]*\((\d+) bytes\)",
                      message)
    if not found:
        return {}
    return {"smallest_arena_recomputed_ops": int(found.group(1)),
            "smallest_arena_bytes": int(found.group(2))}


TEXT = ("gpt2", "gpt2_tiny", "gpt2_medium", "llama_1b", "llama_7b")
# Exported as a user would: transformers' default attention implementation (sdpa).
PLAIN_EXPORT = ("gpt2_medium", "llama_1b")


def is_text(model):
    return model in TEXT


def input_name(model):
    return "input_ids" if is_text(model) else "input"


def make_batch(model, batch, size, classes):
    """(input array, labels array), the same on every machine (numpy's generator, SEED)."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    if is_text(model):
        ids = rng.integers(0, classes, size=(batch, size), dtype=np.int64)
        return ids, np.roll(ids, -1, axis=1)  # next-token labels
    x = rng.standard_normal((batch, 3, size, size)).astype(np.float32)
    return x, rng.integers(0, classes, size=(batch,), dtype=np.int64)


def log_to(path):
    handle = open(path, "a")

    def say(text):
        print(text, flush=True)
        handle.write(text + "\n")
        handle.flush()

    return say


# ----------------------------------------------------------------------------------------------
# Models (PyTorch; export and the baselines)


def build_module(model, size, classes, attn=None):
    """The model with PyTorch's default initialization (seed 0), dropout 0 everywhere, returning
    the logits as a plain tensor. attn: transformers' attn_implementation (None = default)."""
    import torch

    torch.manual_seed(0)
    if model == "resnet50":
        import torchvision

        return torchvision.models.resnet50(weights=None, num_classes=classes)
    if model == "vit_b_16":
        import torchvision

        return torchvision.models.vit_b_16(weights=None, num_classes=classes)  # dropout 0.0
    if model == "vit_tiny":
        from torchvision.models.vision_transformer import VisionTransformer

        return VisionTransformer(image_size=size, patch_size=8, num_layers=2, num_heads=4,
                                 hidden_dim=64, mlp_dim=128, num_classes=classes)
    import transformers

    extra = {"attn_implementation": attn} if attn else {}
    drop = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    if model == "gpt2":
        config = transformers.GPT2Config(**drop, **extra)  # 12 layers, 768, 12 heads, 50257
    elif model == "gpt2_medium":  # 24 layers, 1024, 16 heads: 355 M parameters
        config = transformers.GPT2Config(n_layer=24, n_embd=1024, n_head=16, n_positions=1024,
                                         **drop, **extra)
    elif model == "llama_1b":  # TinyLlama-1.1B's shape: 22 layers, 2048, 32 heads, 4 KV heads
        config = transformers.LlamaConfig(
            hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
            num_attention_heads=32, num_key_value_heads=4, vocab_size=classes,
            max_position_embeddings=2048, rms_norm_eps=1e-5, tie_word_embeddings=False,
            attention_dropout=0.0, **extra)
    elif model == "llama_7b":  # Llama-2-7B's shape: 32 layers, 4096, 32 heads, 11008
        config = transformers.LlamaConfig(
            hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
            num_attention_heads=32, num_key_value_heads=32, vocab_size=classes,
            max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False,
            attention_dropout=0.0, **extra)
    else:
        config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=classes,
                                         n_positions=size, **drop, **extra)
    inner = (transformers.LlamaForCausalLM(config) if model.startswith("llama")
             else transformers.GPT2LMHeadModel(config))

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids):
            return self.inner(input_ids=input_ids, use_cache=False, return_dict=True).logits

    return Wrapped()
