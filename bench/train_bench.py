#!/usr/bin/env python3
"""Training benchmark: memopt's CUDA training executables against PyTorch eager and
torch.compile doing the same step (issue 11, "GPU benchmark").

Three models, fp32, each with SGD (momentum 0.9) and AdamW:
  resnet50_b64   ResNet-50, 64 images of 3x224x224, 1000 classes, BatchNorm on batch statistics
  vit_b_16_b32   ViT-B/16, 32 images of 3x224x224, 1000 classes
  gpt2_b8        GPT-2 small, 8 x 512 tokens, language-model loss (labels [8, 512] int64,
                 cross-entropy over the 50257-word vocabulary on the last axis)
  gpt2_medium_b4 GPT-2 medium, 4 x 1024 tokens, and llama_1b_b4, a TinyLlama-1.1B-shaped
  llama_1b_b4    Llama (32,000 words): issue 24's GPU check, exported plainly (transformers'
                 default attention, the exporter's default optimizer; docs/models.md)
One step on both sides: forward, cross-entropy (mean), backward, optimizer step, and on the
PyTorch side zero_grad(set_to_none=True); the batch is uploaded from host memory in every step
on both sides (memopt's --bench times its batch upload). Reported: median step time, peak
device memory in total and beyond the training state, and memopt's first-step gradients on
the GPU against its host backend on small configurations.

The steps (as bench/gpu_bench.py: prepare here, device step there, report here):

  export   (torch)   exports the graphs with torch.onnx's dynamo exporter at the bench batch
                     (eval mode, dropout 0; ResNet-50 keeps its BatchNormalization nodes, which
                     memopt-compile --bn-batch-stats trains on batch statistics as PyTorch's
                     train mode does) and the small gradient-check graphs. Needs torch,
                     torchvision, transformers and onnxscript: run it where they are (the device
                     machine has them; here a virtual environment with the device's versions).
  prepare  (here)    memopt-compile --train ... --target cuda --emit source for every
                     configuration and optimizer, builds the runtime (CUDA and host) and every
                     executable with this machine's nvcc 13 and cuDNN 9 into the carry folder
                     (executables only: weights are --random-weights on the device, inputs are
                     generated there)
  device   (GPU)     phase A, nothing timed: scripts/gpu_check.sh (kernel suite CUDA vs host),
                     the gradient checks (one SGD step on CUDA and on the host backend, same
                     seed and inputs, --save-state; momentum buffers compared), and
                     torch.compile warm-up processes that fill Inductor's cache; phase B, the GPU
                     alone: memopt's --bench runs one at a time, then PyTorch eager and
                     torch.compile (one child process per model), TF32 off, then TF32 on if the
                     deadline allows
  report   (here)    docs/training-benchmark.md and bench/results/train.json
  curves   (GPU)     loss curves (issue 16): memopt fp32 / fp16 / bf16 and PyTorch fp32 / AMP
                     fp16 / AMP bf16 from the same initial weights (memopt's --random-weights
                     SEED, saved with --steps 0 --save-state and loaded into the PyTorch module
                     by name) on the same batch, N steps; `report --curves` draws them

Mixed precision (issue 16): `prepare --precision fp16|bf16` compiles the memopt programs with
`--precision` (f32 master weights, dynamic loss scaling for fp16; their carry names end in
`.fp16` / `.bf16`, so one carry folder holds several precisions), `device --precision` runs
those and times PyTorch with autocast (`torch.autocast("cuda", dtype)`, a GradScaler with its
defaults for fp16, none for bf16) in eager mode, under torch.compile, and under torch.compile
with `torch._functorch.config.activation_memory_budget = 0.5` (mode `compile-budget`), the
ResNet-50 module and its input channels-last (`torch.channels_last`). The issue's figures are
for SGD with momentum; memory beyond weights + gradients + optimizer state. For example:

    python3 bench/train_bench.py prepare --graphs build-train/graphs --dest build-train/carry \
        --precision fp16 --only resnet50_b64 vit_b_16_b32 gpt2_b8
    # device: python3 .dev-NAME/train_bench.py device --carry .dev-NAME --out $OUT \
    #   --precision fp16 --optimizers sgd --checks --tf32 off --deadline-s 500
    # device: python3 .dev-NAME/train_bench.py curves --carry .dev-NAME --out $OUT \
    #   --configs gpt2_b8 --steps 300
    python3 bench/train_bench.py report --device-json OUT/device.json --prepare-json \
        build-train/carry/prepare.json --doc-out docs/training-benchmark-amp.md \
        --json-out bench/results/train_amp.json --curves OUT/curves.json

Rematerialization under a byte budget (issue 17, GPU table): `prepare --budget-fractions 0.5
0.25` also compiles every configuration with `--memory-budget BYTES` (carry names end in
`.rematPCT`: gpt2_b8.sgd.tf32.remat50). --memory-budget bounds memopt's packed arena alone (the
weight region, i.e. parameters, optimizer state, BN statistics and constants, is outside it),
and the arena holds, besides activations, the gradients still alive at its peak; so for a
fraction F the budget is `gradient_bytes_at_peak + F x (arena_bytes - gradient_bytes_at_peak)`
of the unconstrained compile's report (`remat_budget`). An infeasible budget is recorded in
prepare.json with the smallest arena memopt reached, and prepare goes on. `--remat-allow`,
`--remat-time-limit` pass through; `--remat-only` keeps unconstrained programs already in the
carry. `device --budget-fractions 0.5 0.25` times those programs after each unconstrained one
(and runs the gradient checks of budgeted check programs where the carry has them); PyTorch's
baselines at comparable memory are the modes `checkpoint` (eager, torch.utils.checkpoint with
use_reentrant=False per block: ResNet-50 bottleneck, ViT encoder layer, GPT-2 block) and
`compile-budget` once per `--activation-budgets` value (torch._functorch.config.
activation_memory_budget, each its own child process). `--tf32 default` leaves PyTorch's TF32
switches as they are (cuDNN on, matmul off: "fp32" as users run it) against memopt
`--precision tf32`. Measured kernel times (issue 17's "measured kernel times where known"):
`device --profile NAME.OPT` also writes OUT/times_NAME.OPT.PREC.json (the unconstrained
program's `--profile-times`), and `prepare --remat-kernel-times DIR` gives each budgeted compile
its file (`--remat-kernel-times`; bench/remat_gpu/call3.sh and call4.sh are the run behind
docs/training-benchmark-remat.md, notes in bench/remat_gpu/notes.md). `report --remat` writes
docs/training-benchmark-remat.md and
bench/results/train_remat.json (a table per model; the targets: +5% at 50%, +15% at 25%, below
checkpointing's overhead at the same share of beyond-state memory). Commands:

    python3 bench/train_bench.py prepare --graphs build-train/graphs --dest build-train/carry \
        --precision tf32 --budget-fractions 0.5 0.25 --only resnet50_b64.sgd vit_b_16_b32.sgd \
        gpt2_b8.sgd
    rm -rf /work/main/.dev-NAME && cp -r build-train/carry /work/main/.dev-NAME
    # device call 1 (carry=[".dev-NAME"]): memopt's nine runs, PyTorch eager and checkpoint
    #   python3 .dev-NAME/train_bench.py device --carry .dev-NAME --out $OUT --precision tf32 \
    #     --budget-fractions 0.5 0.25 --optimizers sgd --checks --skip-gpu-check --no-warm \
    #     --tf32 default --modes eager checkpoint --runs 15 --deadline-s 540
    # device call 2: torch.compile without and with activation budgets (the warm-ups, one
    #   process per model, compile its three modes in parallel with the other models')
    #   python3 .dev-NAME/train_bench.py device --carry .dev-NAME --out $OUT --precision tf32 \
    #     --skip-memopt --optimizers sgd --checks --skip-gpu-check --tf32 default \
    #     --modes compile compile-budget --activation-budgets 0.5 0.25 --warm-cap-s 330 \
    #     --runs 15 --deadline-s 560
    python3 bench/train_bench.py report --remat --device-json OUT1/device.json OUT2/device.json \
        --prepare-json build-train/carry/prepare.json

The run behind docs/training-benchmark.md (device calls 3 and 4 of bench/results/train_raw):

    # device: python3 bench/train_bench.py export --out /tmp/g  (the .onnx files come back
    #   through $OUT; their .data files are recreated here as zero-filled files of the
    #   recorded length: --random-weights replaces the values)
    python3 bench/train_bench.py prepare --graphs build-train/graphs --dest build-train/carry
    cp -r build-train/carry /work/main/.dev-traingpu   # the checkout the device call ships
    # device call 3 (carry=[".dev-traingpu"]):
    #   python3 .dev-traingpu/train_bench.py device --carry .dev-traingpu --out $OUT \
    #     --dump-checks resnet50_b2_64px --profile resnet50_b64.sgd vit_b_16_b32.sgd \
    #     gpt2_b8.sgd --deadline-s 555 --runs 15
    # device call 4: the same with --skip-torch, no --dump-checks, --deadline-s 300
    python3 bench/train_bench.py report --device-json bench/results/train_raw/call3/device.json \
        bench/results/train_raw/call4/device.json \
        --prepare-json bench/results/train_raw/call4/prepare.json --notes bench/train_bench_notes.md
"""

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
    --memory-budget bounds the packed arena alone (docs/remat.md, "budget= vs arena-budget="):
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


TEXT = ("gpt2", "gpt2_tiny", "gpt2_medium", "llama_1b")
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
    else:
        config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=classes,
                                         n_positions=size, **drop, **extra)
    inner = (transformers.LlamaForCausalLM(config) if model == "llama_1b"
             else transformers.GPT2LMHeadModel(config))

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids):
            return self.inner(input_ids=input_ids, use_cache=False, return_dict=True).logits

    return Wrapped()


def export_one(name, model, batch, size, classes, work):
    """Exports one configuration to work/NAME.onnx (+ .data), logits as the output."""
    import numpy as np  # noqa: F401
    import onnx
    import torch

    import export_common

    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    module = build_module(model, size, classes,
                          attn=None if model in PLAIN_EXPORT else "eager").eval()
    x, _ = make_batch(model, batch, size, classes)
    tmp_dir = tempfile.mkdtemp(prefix=f"export_{name}_")
    tmp = os.path.join(tmp_dir, f"{name}.onnx")
    # The default optimization folds eval-mode BatchNormalization into the convolutions;
    # ResNet-50 keeps it (optimize=False) so that memopt trains it on batch statistics.
    keep_bn = model == "resnet50"
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(x),), tmp, dynamo=True, external_data=True,
                          optimize=not keep_bn, input_names=[input_name(model)],
                          output_names=["logits"])
    proto = onnx.load(tmp)
    if keep_bn:
        import onnxscript.optimizer

        # Constant folding and dead-code removal only: optimize() would also apply the
        # rewrite rules, BN-into-Conv fusion among them.
        onnxscript.optimizer.fold_constants(proto)
        onnxscript.optimizer.remove_unused_nodes(proto)
        ops = export_common.op_types(proto)
        if "BatchNormalization" not in ops:
            raise SystemExit(f"{name}: BatchNormalization was folded away ({ops})")
    path = os.path.join(work, f"{name}.onnx")
    graph_bytes, data_bytes = export_common.save_with_external_data(proto, path)
    shutil.rmtree(tmp_dir, ignore_errors=True)
    print(json.dumps({"name": name, "graph_bytes": graph_bytes, "data_bytes": data_bytes,
                      "nodes": len(proto.graph.node), "ops": export_common.op_types(proto)}))


def cmd_export(args):
    import torch

    os.makedirs(args.out, exist_ok=True)
    say = log_to(os.path.join(args.out, "export_log.txt"))
    versions = {"torch": torch.__version__}
    for package in ("torchvision", "transformers", "onnx", "onnxscript"):
        versions[package] = __import__(package).__version__
    say("versions: " + json.dumps(versions))
    table = {**BENCH, **CHECKS}
    ok = True
    for name, (model, batch, size, classes) in table.items():
        if args.only and name not in args.only:
            continue
        if model == "tiny_convnet":
            shutil.copy(os.path.join(REPO, "models", "tiny_convnet.onnx"),
                        os.path.join(args.out, "tiny_convnet.onnx"))
            continue
        begin = time.time()
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "export-one", name,
                               model, str(batch), str(size), str(classes), args.out],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            info = json.loads(proc.stdout.strip().splitlines()[-1])
            say(f"ok   {name}: {info['nodes']} nodes, data {info['data_bytes']} B, "
                f"{time.time() - begin:.1f} s, ops {','.join(info['ops'])}")
        else:
            ok = False
            say(f"FAIL {name}:\n{(proc.stderr + proc.stdout)[-3000:]}")
    return 0 if ok else 1


# ----------------------------------------------------------------------------------------------
# prepare (here): compile, build the runtime and the executables


def runtime_sources(dest):
    """A snapshot of the runtime's sources at HEAD (others edit the working tree)."""
    src = os.path.join(dest, "src")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                          text=True).stdout.strip()
    stamp = os.path.join(src, "COMMIT")
    if os.path.exists(stamp) and open(stamp).read().strip() == head:
        return src, head  # unchanged: keep the timestamps (no rebuild)
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    subprocess.run(f"git archive HEAD lib/Runtime include unittests/Runtime test/GPU "
                   f"scripts/gpu_check.sh | "
                   f"tar -x -C {src}", shell=True, cwd=REPO, check=True)
    with open(stamp, "w") as handle:
        handle.write(head + "\n")
    return src, head


def build_runtime(src, build, cuda, jobs):
    targets = "memopt_runtime_main memopt_runtime_driver memopt_runtime_common " + \
        ("memopt_runtime_cuda" if cuda else "memopt_runtime_host")
    flags = "-DMEMOPT_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90" if cuda else \
        "-DMEMOPT_ENABLE_CUDA=OFF"
    subprocess.run(f"cmake -S {src}/lib/Runtime -B {build} -G Ninja -DCMAKE_BUILD_TYPE=Release "
                   f"{flags} >/dev/null && cmake --build {build} -j {jobs} --target {targets}",
                   shell=True, check=True)


def frozen_constants(graph):
    """Float initializers that are no parameters of the PyTorch model: the exporter's scalar
    constants (and a folded attention mask, 'where'). memopt-compile --train trains every float
    initializer that --freeze does not name; a trained -inf mask or scalar gives NaN gradients.
    Folded copies of parameters (ViT's transposed weights, its expanded class token) stay
    trainable: they are the parameters, in another layout."""
    import onnx

    proto = onnx.load(graph, load_external_data=False)
    names = []
    for tensor in proto.graph.initializer:
        count = 1
        for dim in tensor.dims:
            count *= dim
        if tensor.data_type == onnx.TensorProto.FLOAT and (count <= 1 or tensor.name == "where"):
            names.append(tensor.name)
    # The exporter gives every ResNet convolution a zero bias (val_N) that
    # torchvision's model does not have (bias=False before BatchNorm): frozen,
    # so that both sides train the same parameters. Their exact gradient is
    # zero anyway (batch statistics subtract any per-channel constant).
    initializers = {tensor.name for tensor in proto.graph.initializer}
    consumers = {}
    for node in proto.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node.op_type)
    for node in proto.graph.node:
        if (node.op_type == "Conv" and len(node.input) > 2 and node.input[2] in initializers
                and consumers.get(node.output[0]) == ["BatchNormalization"]
                and node.input[2] not in names):
            names.append(node.input[2])
    return names


def compile_one(command, out, key, programs, summary, precision, extra=None, timeout=None):
    """Runs one memopt-compile; records its report (or its error) in summary["configs"][key].
    Returns the report, or None when it failed. An infeasible --memory-budget is recorded
    with the smallest arena memopt reached."""
    begin = time.time()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        code, text = proc.returncode, (proc.stderr or proc.stdout).strip()
    except subprocess.TimeoutExpired:
        code, text = -1, f"memopt-compile stopped after {timeout} s"
    seconds = time.time() - begin
    shown = "memopt-compile GRAPH.onnx " + " ".join(
        os.path.basename(c) if c.startswith(programs) else c for c in command[2:])
    if code != 0:
        entry = {"error": text[-3000:], "command": shown, "compile_s": round(seconds, 1),
                 "precision": precision, **(extra or {})}
        entry.update(parse_remat_failure(text))
        summary["configs"][key] = entry
        print(f"{key}: memopt-compile FAILED ({seconds:.1f} s)\n{text[-3000:]}")
        return None
    report = json.load(open(out + ".report.json"))
    report.pop("buffers", None)
    report.pop("live_bytes_per_op", None)
    summary["configs"][key] = {"compile_s": round(seconds, 1), "command": shown,
                               "report": report, "precision": precision,
                               "source_bytes": os.path.getsize(out + ".cu"), **(extra or {})}
    remat = report.get("remat") or {}
    print(f"{key}: compiled in {seconds:.1f} s, arena "
          f"{report['arena_bytes'] / 2**20:.1f} MiB, training "
          f"{json.dumps(report.get('training'))}" +
          (f", {remat.get('recomputed_ops')} ops recomputed (+"
           f"{100 * remat.get('added_time_fraction', 0):.2f}% estimated)" if remat else ""))
    return report


def add_build_jobs(jobs, name, key, out, src, rt_host, dest):
    """nvcc of the CUDA object (the runtime library travels once; linked on the device), and
    for the gradient-check configurations the host executable."""
    inc = os.path.join(src, "include")
    lib = lambda n: os.path.join(rt_host, f"libmemopt_runtime_{n}.a")  # noqa: E731
    jobs.append(((key, "cuda"), ["nvcc", "-std=c++17", "-O1", "-arch=sm_90", "-c",
                                 out + ".cu", f"-I{inc}", "-o",
                                 os.path.join(dest, "obj", key + ".cuda.o")]))
    if name in CHECKS:
        jobs.append(((key, "host"),
                     ["sh", "-c",
                      f"g++ -std=c++17 -O1 -x c++ {out}.cu -x none -I{inc} "
                      f"{lib('main')} {lib('driver')} {lib('host')} {lib('common')} "
                      f"-lpthread -o {os.path.join(dest, 'bin', key)}.host"]))


def cmd_prepare(args):
    dest = os.path.abspath(args.dest)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    src, commit = runtime_sources(work)
    rt_cuda, rt_host = os.path.join(work, "rt-cuda"), os.path.join(work, "rt-host")
    if not args.skip_runtime:
        build_runtime(src, rt_cuda, True, args.jobs)
        build_runtime(src, rt_host, False, args.jobs)
    compile_bin = os.path.abspath(args.compile)
    for sub in ("bin", "obj", "rt"):
        os.makedirs(os.path.join(dest, sub), exist_ok=True)
    for n in ("main", "driver", "cuda", "common"):
        shutil.copy(os.path.join(rt_cuda, f"libmemopt_runtime_{n}.a"), os.path.join(dest, "rt"))
    programs = os.path.join(work, "programs")
    os.makedirs(programs, exist_ok=True)
    summary = {"commit": commit, "configs": {}}
    summary_path = os.path.join(dest, "prepare.json")
    if os.path.exists(summary_path):
        summary["configs"] = json.load(open(summary_path)).get("configs", {})
    jobs = []  # (key, command) builds, run after the compiles
    table = [(n, c, opt) for n, c in BENCH.items() for opt in OPTIMIZERS] + \
        [(n, c, "sgd") for n, c in CHECKS.items()]
    for name, (model, batch, size, classes), opt in table:
        key = f"{name}.{opt}"
        if args.only and name not in args.only and key not in args.only:
            continue
        graph = os.path.join(os.path.abspath(args.graphs), f"{name}.onnx")
        if not os.path.exists(graph):
            summary["configs"][key] = {"error": "graph not exported"}
            print(f"{key}: no graph")
            continue
        suffix = precision_suffix(args.precision)
        out = os.path.join(programs, key + suffix)
        command = [compile_bin, graph, "--train", "--loss", "cross-entropy", "--loss-output",
                   "logits" if model != "tiny_convnet" else "output", *OPTIMIZERS[opt],
                   "--target", "cuda", "--arch", "sm_90", "--emit", "source", "-o", out,
                   "--report", out + ".report.json", "--precision", args.precision]
        if model in ("resnet50", "tiny_convnet"):
            command.append("--bn-batch-stats")
        frozen = frozen_constants(graph)
        if frozen:
            command += ["--freeze", ",".join(frozen)]
        previous = summary["configs"].get(key + suffix, {})
        if (args.remat_only and "report" in previous and
                os.path.exists(os.path.join(dest, "obj", key + suffix + ".cuda.o"))):
            # The unconstrained program is in the carry already: its report gives the budgets.
            report = previous["report"]
            print(f"{key}: unconstrained program kept (arena "
                  f"{report['arena_bytes'] / 2**20:.1f} MiB)")
        else:
            report = compile_one(command, out, key + suffix, programs, summary, args.precision)
            if report is None:
                continue
            add_build_jobs(jobs, name, key + suffix, out, src, rt_host, dest)
        for fraction in args.budget_fractions:
            variant = key + suffix + remat_suffix(fraction)
            budget = remat_budget(report, fraction)
            out_remat = os.path.join(programs, variant)
            extra = ["--memory-budget", str(budget["budget_bytes"])]
            if args.remat_time_limit is not None:
                extra += ["--remat-time-limit", str(args.remat_time_limit)]
            if args.remat_allow:
                extra += ["--remat-allow", args.remat_allow]
            if args.remat_max_computations is not None:
                extra += ["--remat-max-computations", str(args.remat_max_computations)]
            times = os.path.join(args.remat_kernel_times or "", f"times_{key}{suffix}.json")
            if args.remat_kernel_times and os.path.exists(times):
                extra += ["--remat-kernel-times", os.path.abspath(times)]
                budget["kernel_times"] = os.path.basename(times)
            remat_command = [out_remat if c == out else
                             out_remat + ".report.json" if c == out + ".report.json" else c
                             for c in command] + extra
            print(f"{variant}: --memory-budget {budget['budget_bytes']} = gradients at the "
                  f"peak {budget['gradient_bytes_at_peak']} + {fraction} x activation arena "
                  f"{budget['activation_arena_bytes']}")
            for stale in (os.path.join(dest, "obj", variant + ".cuda.o"),
                          os.path.join(dest, "bin", variant + ".host")):
                if os.path.exists(stale):  # an earlier prepare's program of this name
                    os.remove(stale)
            if compile_one(remat_command, out_remat, variant, programs, summary,
                           args.precision, extra={"remat_budget": budget},
                           timeout=args.remat_compile_timeout_s) is not None:
                add_build_jobs(jobs, name, variant, out_remat, src, rt_host, dest)
    import gpu_bench

    def done(key, code, text, seconds):
        entry = summary["configs"].setdefault(key[0], {})
        if code != 0:
            entry[f"{key[1]}_build_error"] = text[-3000:]
            print(f"{key[0]}: {key[1]} build FAILED\n{text[-3000:]}")
        else:
            entry[f"{key[1]}_build_s"] = round(seconds, 1)
            if key[1] == "host":
                subprocess.run(["strip", os.path.join(dest, "bin", f"{key[0]}.host")])
            print(f"{key[0]}: {key[1]} built in {seconds:.0f} s")

    gpu_bench.run_parallel(jobs, args.jobs, time.time() + 3600, done, print)
    shutil.copy(__file__, os.path.join(dest, "train_bench.py"))
    # The runtime's sources at this commit, for gpu_check.sh on the device (the kernel
    # suite of this commit, not of the checkout the device call ships).
    shutil.rmtree(os.path.join(dest, "src"), ignore_errors=True)
    shutil.copytree(src, os.path.join(dest, "src"))
    with open(summary_path, "w") as handle:
        json.dump(summary, handle, indent=1)
    total = sum(os.path.getsize(f) for f in glob.glob(os.path.join(dest, "**"), recursive=True)
                if os.path.isfile(f))
    print(f"carry folder {dest}: {total / 2**20:.1f} MiB")
    return 0


# ----------------------------------------------------------------------------------------------
# device


def library_path():
    """cuDNN and cuBLAS from PyTorch's wheels, then the toolkit's."""
    paths = []
    for module in ("nvidia.cudnn", "nvidia.cublas", "nvidia.cu13"):
        try:
            base = list(__import__(module, fromlist=["x"]).__path__)[0]
            paths.append(os.path.join(base, "lib"))
        except Exception:  # noqa: BLE001 - optional
            pass
    paths += ["/usr/local/cuda/lib64"]
    return ":".join(p for p in paths if os.path.isdir(p))


def parse_bench(text):
    import gpu_bench

    result = gpu_bench.parse_bench(text)
    result.pop("beyond_weights_bytes", None)
    if "arena_bytes" in result:
        result["total_bytes"] = (result["weight_bytes"] + result["arena_bytes"] +
                                 result["io_bytes"] + result["workspace_bytes"])
        # The weight region holds the training state (parameters, optimizer state, BN
        # statistics, constants); gradients live in the arena.
        result["beyond_state_bytes"] = result["total_bytes"] - result["weight_bytes"]
    losses = [float(v) for v in re.findall(r"step \d+ loss (\S+)", text)]
    if losses:
        result["first_loss"], result["last_loss"] = losses[0], losses[-1]
    return result


def run_streamed(command, timeout, env):
    """Runs `command`, reading its output as it comes; stops it after `timeout` seconds.
    Returns (exit code or -1 on timeout, output, times of its `step N loss` lines)."""
    import threading

    # The executable's stdout is block-buffered into a pipe: stdbuf -oL makes each step line
    # arrive when it is printed (added after the second device call, whose step lines all
    # arrived at the end).
    if shutil.which("stdbuf"):
        command = ["stdbuf", "-oL"] + list(command)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    lines, stamps = [], []

    def reader():
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("step "):
                stamps.append(time.time())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        code = proc.wait(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = -1
        lines.append(f"\n[stopped after {timeout:.0f} s]\n")
    thread.join(timeout=5)
    return code, "".join(lines), stamps


def grad_check(bin_dir, work, name, say, env, suffix=""):
    """One SGD-momentum step on CUDA and on the host backend (same seed and inputs), then the
    momentum buffers (= the first-step gradients) compared."""
    import numpy as np

    model, batch, size, classes = CHECKS[name]
    x, y = make_batch(model, batch, size, classes)
    base = os.path.join(work, "check", name)
    os.makedirs(base, exist_ok=True)
    np.save(os.path.join(base, "x.npy"), x)
    np.save(os.path.join(base, "y.npy"), y)
    first = input_name(model) if model != "tiny_convnet" else "input"
    result = {}
    for backend in ("host", "cuda"):
        exe = os.path.join(bin_dir, f"{name}.sgd{suffix}.{backend}")
        state = os.path.join(base, backend)
        shutil.rmtree(state, ignore_errors=True)
        command = [exe, "--random-weights", str(SEED), "--input",
                   f"{first}={os.path.join(base, 'x.npy')}", "--input",
                   f"labels={os.path.join(base, 'y.npy')}", "--steps", "1", "--save-state",
                   state]
        begin = time.time()
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
        except subprocess.TimeoutExpired:
            result[backend] = {"error": "timeout 240 s"}
            say(f"check {name} {backend}: timeout")
            return result
        text = proc.stdout + proc.stderr
        result[backend] = {"exit": proc.returncode, "seconds": round(time.time() - begin, 1),
                           "log_tail": text[-3000:]}
        loss = re.findall(r"step 1 loss (\S+)", text)
        if loss:
            result[backend]["loss"] = float(loss[0])
        if proc.returncode != 0:
            say(f"check {name} {backend}: FAILED exit {proc.returncode}\n{text[-2000:]}")
            return result
    worst, rows = None, []
    for path in sorted(glob.glob(os.path.join(base, "host", "*.momentum_buffer.npy"))):
        other = os.path.join(base, "cuda", os.path.basename(path))
        a = np.load(path).astype(np.float64)
        b = np.load(other).astype(np.float64) if os.path.exists(other) else None
        if b is None or a.shape != b.shape:
            rows.append({"name": os.path.basename(path), "error": "missing or other shape"})
            continue
        norm = float(np.linalg.norm(a))
        rel = float(np.linalg.norm(b - a)) / max(norm, 1e-30)
        finite = bool(np.isfinite(b).all())
        rows.append({"name": os.path.basename(path)[:-len(".momentum_buffer.npy")],
                     "rel_l2": rel if finite else float("inf"), "host_norm": norm,
                     "elements": int(a.size)})
        if worst is None or not finite or rel > worst["rel_l2"]:
            worst = rows[-1]
    rows.sort(key=lambda r: -r.get("rel_l2", float("inf")))
    # Gradients that are zero in exact arithmetic (a bias before a batch-statistics BN) hold
    # rounding noise on both backends: also the worst over tensors whose norm is at least
    # 1e-4 of the largest one, and the relative L2 of all gradients together.
    norms = [r["host_norm"] for r in rows if "host_norm" in r and np.isfinite(r["host_norm"])]
    if norms:
        floor = 1e-4 * max(norms)
        big = [r for r in rows if r.get("host_norm", 0) >= floor]
        result["worst_significant"] = max(big, key=lambda r: r["rel_l2"]) if big else None
        num = den = 0.0
        for path in sorted(glob.glob(os.path.join(base, "host", "*.momentum_buffer.npy"))):
            other = os.path.join(base, "cuda", os.path.basename(path))
            if os.path.exists(other):
                a = np.load(path).astype(np.float64)
                b = np.load(other).astype(np.float64)
                if a.shape == b.shape:
                    num += float(np.sum((a - b) ** 2))
                    den += float(np.sum(a ** 2))
        result["global_rel_l2"] = (num ** 0.5) / max(den ** 0.5, 1e-30)
        result["host_finite"] = all(np.isfinite(r.get("host_norm", 0)) for r in rows)
    result["tensors"] = len(rows)
    result["worst"] = worst
    result["top"] = rows[:8]
    result["errors"] = [r for r in rows if "error" in r]
    if "loss" in result.get("host", {}) and "loss" in result.get("cuda", {}):
        h, c = result["host"]["loss"], result["cuda"]["loss"]
        result["loss_rel"] = abs(c - h) / max(abs(h), 1e-30)
    say(f"check {name}: global rel L2 {result.get('global_rel_l2')}, worst significant "
        f"{result.get('worst_significant')}")
    say(f"check {name}: {len(rows)} gradients, worst rel L2 "
        f"{worst['rel_l2'] if worst else float('nan'):.2e} ({worst['name'] if worst else '-'}), "
        f"loss host {result.get('host', {}).get('loss')} cuda {result.get('cuda', {}).get('loss')}")
    return result


def dump_compare(bin_dir, work, name, say, env, out):
    """Runs one step of a check configuration on both backends with --dump-ops and compares
    every op's results in program order (the host backend is the reference): the first op
    whose results differ, and the worst ones."""
    import numpy as np

    model, batch, size, classes = CHECKS[name]
    base = os.path.join(work, "check", name)
    first = input_name(model) if model != "tiny_convnet" else "input"
    dirs = {}
    for backend in ("host", "cuda"):
        exe = os.path.join(bin_dir, f"{name}.sgd.{backend}")
        dump = os.path.join(work, "dump", name, backend)
        shutil.rmtree(dump, ignore_errors=True)
        os.makedirs(dump)
        proc = subprocess.run([exe, "--random-weights", str(SEED), "--input",
                               f"{first}={os.path.join(base, 'x.npy')}", "--input",
                               f"labels={os.path.join(base, 'y.npy')}", "--steps", "1",
                               "--dump-ops", dump], capture_output=True, text=True,
                              timeout=240, env=env)
        if proc.returncode != 0:
            say(f"dump {name} {backend}: FAILED {(proc.stdout + proc.stderr)[-1500:]}")
            return {"error": (proc.stdout + proc.stderr)[-1500:]}
        dirs[backend] = dump
    rows = []
    for line in open(os.path.join(dirs["host"], "ops.txt")):
        parts = line.split(" ", 3)
        if len(parts) < 4:
            continue
        file, kind, node, shape = parts
        a = np.load(os.path.join(dirs["host"], file)).astype(np.float64)
        other = os.path.join(dirs["cuda"], file)
        if not os.path.exists(other):
            rows.append({"file": file, "kind": kind, "node": node, "error": "missing"})
            continue
        b = np.load(other).astype(np.float64)
        if a.shape != b.shape or a.dtype.kind not in "fc":
            if a.shape != b.shape:
                rows.append({"file": file, "kind": kind, "node": node, "error": "shape"})
            continue
        norm = float(np.linalg.norm(a))
        diff = float(np.linalg.norm(a - b))
        rows.append({"file": file, "kind": kind, "node": node, "shape": shape.strip(),
                     "norm": norm, "rel": diff / max(norm, 1e-30),
                     "max_abs": float(np.max(np.abs(a - b))) if a.size else 0.0})
    scale = max([r.get("norm", 0) for r in rows] + [1e-30])
    significant = [r for r in rows if r.get("norm", 0) >= 1e-6 * scale]
    first_bad = next((r for r in significant if r.get("rel", 0) > 1e-4), None)
    worst = sorted(significant, key=lambda r: -r.get("rel", 0))[:15]
    result = {"ops": len(rows), "first_over_1e-4": first_bad, "worst": worst}
    with open(os.path.join(out, f"dump_{name}.json"), "w") as handle:
        json.dump({"summary": result, "rows": rows}, handle)
    say(f"dump {name}: {len(rows)} op results compared; first over 1e-4: {first_bad}")
    for r in worst[:8]:
        say(f"  worst {r['rel']:.2e} {r['kind']} {r['node']} {r.get('shape')}")
    shutil.rmtree(os.path.join(work, "dump", name), ignore_errors=True)
    return result


def profile_one(bin_dir, name, opt, inputs, env, out, say, suffix=""):
    """One eager step timed op by op (--profile, after two untimed steps); each node's
    forward time also as OUT/times_NAME.OPT[SUFFIX].json (--profile-times), which `prepare
    --remat-kernel-times DIR` gives the budgeted compiles."""
    model = BENCH[name][0]
    exe = os.path.join(bin_dir, f"{name}.{opt}{suffix}.cuda")
    command = [exe, "--random-weights", str(SEED), "--input",
               f"{input_name(model)}={inputs[name][0]}", "--input",
               f"labels={inputs[name][1]}", "--steps", "3", "--profile-times",
               os.path.join(out, f"times_{name}.{opt}{suffix}.json")]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
        text = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        text = "[timeout 120 s]"
    with open(os.path.join(out, f"profile_{name}.{opt}{suffix}.txt"), "w") as handle:
        handle.write(text)
    lines = [line for line in text.splitlines() if line.startswith("profile")]
    say(f"profile {name}.{opt}:\n" + "\n".join(lines[:40]))
    return lines


def link_executables(carry, work, results, say):
    """Links the carry's CUDA objects with its runtime (both built on the development
    machine) into WORK/bin, with cuDNN / cuBLASLt from PyTorch's wheels; copies the host
    executables there. Returns that folder."""
    # Link the CUDA executables (objects and runtime built on the development machine).
    link_dir = os.path.join(work, "link")
    os.makedirs(link_dir, exist_ok=True)
    for path in library_path().split(":"):
        for lib_name in ("libcudnn.so", "libcublasLt.so"):
            found = sorted(glob.glob(os.path.join(path, lib_name + "*")))
            target = os.path.join(link_dir, lib_name)
            if found and not os.path.exists(target):
                os.symlink(found[0], target)
    rt = lambda n: os.path.join(carry, "rt", f"libmemopt_runtime_{n}.a")  # noqa: E731
    exe_dir = os.path.join(work, "bin")
    os.makedirs(exe_dir, exist_ok=True)
    link_jobs = []
    for obj in sorted(glob.glob(os.path.join(carry, "obj", "*.cuda.o"))):
        key = os.path.basename(obj)[:-len(".cuda.o")]
        link_jobs.append((key, ["nvcc", "-arch=sm_90", obj, rt("main"), rt("driver"), rt("cuda"),
                                rt("common"), f"-L{link_dir}", "-lcublasLt", "-lcudnn", "-o",
                                os.path.join(exe_dir, key + ".cuda")]))
    for exe in glob.glob(os.path.join(carry, "bin", "*.host")):
        shutil.copy(exe, exe_dir)
    results["link_errors"] = {}

    def linked(key, code, text, seconds):
        if code != 0:
            results["link_errors"][key] = text[-2000:]
            say(f"link {key}: FAILED\n{text[-1500:]}")

    import gpu_bench

    gpu_bench.run_parallel(link_jobs, 16, time.time() + 120, linked, say)
    return exe_dir


def cmd_device(args):
    import numpy as np

    begin_all = time.time()
    deadline = begin_all + args.deadline_s
    carry = os.path.abspath(args.carry)
    bin_dir = os.path.join(carry, "bin")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    say = log_to(os.path.join(out, "device_log.txt"))
    work = args.work
    os.makedirs(work, exist_ok=True)
    results = {"settings": {"seed": SEED, "runs": args.runs, "optimizers": OPTIMIZERS},
               "phases": {}, "memopt": {}, "checks": {}, "torch": {}}
    result_path = os.path.join(out, "device.json")

    def save():
        with open(result_path, "w") as handle:
            json.dump(results, handle, indent=1)

    def phase(name):
        results["phases"][name] = round(time.time() - begin_all, 1)
        say(f"== {name} at {results['phases'][name]} s")
        save()

    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = library_path() + ":" + env.get("LD_LIBRARY_PATH", "")
    say(f"LD_LIBRARY_PATH={env['LD_LIBRARY_PATH']}")
    try:
        results["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.sm",
             "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass

    bin_dir = link_executables(carry, work, results, say)
    phase("link_done_s")

    # Phase A (nothing timed): gpu_check.sh, torch.compile warm-ups, gradient checks.
    check_proc = None
    if not args.skip_gpu_check:
        check_log = open(os.path.join(out, "gpu_check_log.txt"), "w")
        source = os.path.join(carry, "src")
        source = source if os.path.exists(os.path.join(source, "scripts")) else REPO
        check_proc = subprocess.Popen(
            ["bash", os.path.join(source, "scripts", "gpu_check.sh"), "/tmp/memopt-gpu-check"],
            stdout=check_log, stderr=subprocess.STDOUT, cwd=source,
            env=dict(os.environ, JOBS="16", CUDA_ARCH="90", SKIP_PERF="1"))
    torch_env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR="/tmp/inductor-cache",
                     PYTHONUNBUFFERED="1")
    warm = []
    if not args.skip_torch and not args.no_warm:
        for name in args.configs:
            log = open(os.path.join(work, f"warm_{name}.log"), "w")
            warm.append((name, subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "torch-one", name, "--modes",
                 *[m for m in args.modes if m.startswith("compile")], "--warm-only",
                 "--tf32", args.tf32[0], "--optimizers", "sgd",
                 "--precision", args.precision,
                 "--out",
                 os.path.join(work, f"warm_{name}.json")],
                stdout=log, stderr=subprocess.STDOUT, env=torch_env), log))
    suffix = precision_suffix(args.precision)
    results["precision"] = args.precision
    variants = [""] + [remat_suffix(f) for f in args.budget_fractions]
    for name in args.checks:
        for variant in variants:
            exes = [os.path.join(bin_dir, f"{name}.sgd{suffix}{variant}.{b}")
                    for b in ("host", "cuda")]
            if variant and not all(os.path.exists(e) for e in exes):
                continue  # budgeted check programs are optional (prepare --only NAME)
            results["checks"][name + variant] = grad_check(bin_dir, work, name, say, env,
                                                           suffix + variant)
            save()
    for name in args.dump_checks:
        results.setdefault("dumps", {})[name] = dump_compare(bin_dir, work, name, say, env,
                                                              out)
        save()
    phase("checks_done_s")
    if check_proc is not None:
        try:
            check_proc.wait(timeout=max(10.0, begin_all + args.gpu_check_cap_s - time.time()))
        except subprocess.TimeoutExpired:
            check_proc.kill()
            check_proc.wait()
        check_log.close()
        text = open(os.path.join(out, "gpu_check_log.txt")).read()
        summary = re.findall(r".*passed, \d+ failed.*", text)
        results["gpu_check"] = {"exit": check_proc.returncode,
                                "passed": "GPU CHECK PASSED" in text,
                                "summary": summary[-1] if summary else None,
                                "failures": [line for line in text.splitlines()
                                             if "FAIL" in line][:40]}
        say(f"gpu_check.sh: exit {check_proc.returncode}, {results['gpu_check']['summary']}")
        phase("gpu_check_done_s")

    # The torch.compile warm-ups run GPU steps too: wait for them before anything is
    # timed (in the third device call memopt's runs beside them took up to 2x as long).
    for name, proc, log in warm:
        try:
            proc.wait(timeout=max(5.0, begin_all + args.warm_cap_s - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            say(f"warm-up {name}: stopped at the cap")
        log.close()
        results.setdefault("warm", {})[name] = open(
            os.path.join(work, f"warm_{name}.log")).read()[-1500:]
    warm = []
    phase("warm_done_s")

    # Phase B1: memopt, one run at a time.
    inputs = {}
    for name in args.configs:
        model, batch, size, classes = BENCH[name]
        x, y = make_batch(model, batch, size, classes)
        inputs[name] = (os.path.join(work, f"{name}.x.npy"), os.path.join(work, f"{name}.y.npy"))
        np.save(inputs[name][0], x)
        np.save(inputs[name][1], y)
    for key in args.profile:
        name, opt, *rest = key.split(".")  # NAME.OPT or NAME.OPT.rematPCT
        if name in inputs and time.time() < deadline - 90:
            results.setdefault("profiles", {})[key] = profile_one(
                bin_dir, name, opt, inputs, env, out, say,
                suffix + "".join("." + r for r in rest))
            save()
    phase("profiles_done_s")
    # ResNet-50 last: its step was the slow one in the first device call. Each program
    # under a budget (prepare --budget-fractions) right after its unconstrained one.
    runs = [(name, opt, variant)
            for name in sorted(args.configs, key=lambda n: BENCH[n][0] == "resnet50")
            for opt in args.optimizers for variant in variants]
    for name, opt, variant in ([] if args.skip_memopt else runs):
        model = BENCH[name][0]
        key = f"{name}.{opt}{variant}"
        exe = os.path.join(bin_dir, f"{name}.{opt}{suffix}{variant}.cuda")
        if not os.path.exists(exe):
            results["memopt"][key] = {"error": "no executable"}
            continue
        if time.time() > deadline - 60:
            results["memopt"][key] = {"error": "deadline"}
            continue
        earlier = [results["memopt"].get(f"{name}.{o}{variant}", {})
                   for o in args.optimizers]
        if any(e.get("exit") == -1 for e in earlier):
            results["memopt"][key] = {"error": "skipped: the other optimizer's run of this "
                                      "model did not finish in its time limit"}
            continue
        command = [exe, "--random-weights", str(SEED), "--input",
                   f"{input_name(model)}={inputs[name][0]}", "--input",
                   f"labels={inputs[name][1]}", "--steps", "0", "--bench", str(args.runs)]
        limit = min(args.memopt_timeout_s.get(model, 60), deadline - time.time() - 30)
        begin = time.time()
        code, text, stamps = run_streamed(command, limit, env)
        entry = {"wall_s": round(time.time() - begin, 1), "exit": code}
        # Wall-clock time between consecutive step lines (a fallback when --bench does not
        # finish; includes the loss print).
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        if gaps:
            entry["step_wall_ms"] = [round(g * 1000, 1) for g in gaps]
            entry["step_wall_median_ms"] = round(statistics.median(gaps) * 1000, 1)
            entry["steps_done"] = len(stamps)
        if code == 0:
            entry.update(parse_bench(text))
            say(f"memopt {key}: {entry.get('median_ms', float('nan')):.2f} ms, total "
                f"{entry.get('total_bytes', 0) / 2**20:.0f} MiB, beyond state "
                f"{entry.get('beyond_state_bytes', 0) / 2**20:.0f} MiB, device peak "
                f"{entry.get('device_peak_used_bytes', 0) / 2**20:.0f} MiB, loss "
                f"{entry.get('first_loss')} -> {entry.get('last_loss')}")
        else:
            entry["error"] = text[-3000:]
            say(f"memopt {key}: FAILED exit {code}\n{text[-2000:]}")
        results["memopt"][key] = entry
        save()
    phase("memopt_done_s")

    # The warm-ups ran beside the memopt runs (compiling on the CPU; see the doc).
    for name, proc, log in warm:
        try:
            proc.wait(timeout=max(5.0, begin_all + args.warm_cap_s - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            say(f"warm-up {name}: stopped at the cap")
        log.close()
        results.setdefault("warm", {})[name] = open(
            os.path.join(work, f"warm_{name}.log")).read()[-1500:]
    phase("warm_done_s")

    # Phase B2: PyTorch, one child process per model and TF32 setting.
    # One child process for the eager modes and torch.compile without a budget, one per
    # activation budget (each a fresh torch.compile with its own functorch config).
    if not args.skip_torch:
        for tf32 in args.tf32:
            modes = (args.modes if tf32 == args.tf32[0] or args.tf32_compile
                     else [m for m in args.modes if not m.startswith("compile")])
            groups = [[m for m in modes if not m.startswith("compile-budget")]] + \
                [[m] for m in modes if m.startswith("compile-budget")]
            for name, group in [(n, g) for n in args.configs for g in groups if g]:
                entry_key = f"{name}.tf32={tf32}"
                remaining = deadline - time.time()
                if remaining < 40:
                    results["torch"].setdefault(entry_key, {"runs": {}})["runs"].update(
                        {f"{m}.{o}": {"error": "deadline"} for m in group
                         for o in args.optimizers})
                    continue
                part = os.path.join(work, f"torch_{name}_{tf32}_{'_'.join(group)}.json")
                if os.path.exists(part):
                    os.remove(part)  # an earlier call's result on this machine
                command = [sys.executable, os.path.abspath(__file__), "torch-one", name,
                           "--out", part, "--runs", str(args.runs), "--tf32", tf32,
                           "--precision", args.precision,
                           "--deadline", str(deadline - 10), "--optimizers", *args.optimizers,
                           "--modes", *group]
                try:
                    subprocess.run(command, env=torch_env, timeout=remaining)
                except subprocess.TimeoutExpired:
                    say(f"torch {name} tf32={tf32} {group}: killed at the deadline")
                if os.path.exists(part):
                    part_result = json.load(open(part))
                    merged = results["torch"].setdefault(entry_key, {"runs": {}})
                    for field, value in part_result.items():
                        if field != "runs":
                            merged.setdefault(field, value)
                    merged.setdefault("runs", {}).update(part_result.get("runs", {}))
                    for key, entry in part_result.get("runs", {}).items():
                        if "median_ms" in entry:
                            say(f"torch {name} {key} tf32={tf32}: {entry['median_ms']:.2f} ms, "
                                f"peak {entry['peak_allocated_bytes'] / 2**20:.0f} MiB, beyond "
                                f"state {entry['beyond_state_bytes'] / 2**20:.0f} MiB")
                        else:
                            say(f"torch {name} {key} tf32={tf32}: {entry.get('error')}")
                save()
    phase("total_s")
    print_table(results)
    return 0


def print_table(results):
    print("\n| config | optimizer | memopt ms | eager ms | compile ms | memopt total MiB | "
          "eager peak MiB | compile peak MiB | memopt beyond state | eager beyond | "
          "compile beyond |")
    for key, m in results.get("memopt", {}).items():
        name, opt = key.split(".")[:2]  # NAME.OPT[.rematPCT]
        torch_runs = results.get("torch", {})
        t = next((torch_runs[f"{name}.tf32={v}"].get("runs", {}) for v in
                  ("off", "default", "on") if f"{name}.tf32={v}" in torch_runs), {})
        e, c = t.get(f"eager.{opt}", {}), t.get(f"compile.{opt}", {})

        def ms(r):
            return f"{r['median_ms']:.1f}" if "median_ms" in r else "-"

        def mb(r, k):
            return f"{r[k] / 2**20:.0f}" if k in r else "-"

        label = name + key[len(name) + 1 + len(opt):]  # NAME[.rematPCT]
        print(f"| {label} | {opt} | {ms(m)} | {ms(e)} | {ms(c)} | {mb(m, 'total_bytes')} | "
              f"{mb(e, 'peak_allocated_bytes')} | {mb(c, 'peak_allocated_bytes')} | "
              f"{mb(m, 'beyond_state_bytes')} | {mb(e, 'beyond_state_bytes')} | "
              f"{mb(c, 'beyond_state_bytes')} |")
    for name, check in results.get("checks", {}).items():
        worst = check.get("worst") or {}
        print(f"check {name}: worst rel L2 {worst.get('rel_l2')} ({worst.get('name')}), "
              f"loss rel {check.get('loss_rel')}")
    if "gpu_check" in results:
        print(f"gpu_check: {results['gpu_check']}")


# ----------------------------------------------------------------------------------------------
# PyTorch side (a child process per model)


def checkpoint_blocks(module, model):
    """Mode `checkpoint` (issue 17's baseline): torch.utils.checkpoint with
    use_reentrant=False around each block, so that only block inputs are saved and each
    block's forward runs again in the backward. ResNet-50: each Bottleneck of layer1-4 (16);
    ViT: each encoder layer (12); GPT-2 and Llama: each decoder block through transformers' own
    switch (gradient_checkpointing_enable), wrapped by hand if that fails. Returns the blocks wrapped.
    (BatchNorm's running statistics are updated again when a block is recomputed, as always
    with torch.utils.checkpoint; the batch statistics and gradients are unchanged.)"""
    import torch
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(torch.nn.Module):
        def __init__(self, block):
            super().__init__()
            self.block = block

        def forward(self, *args, **kwargs):
            return checkpoint(self.block, *args, use_reentrant=False, **kwargs)

    if model in ("gpt2", "gpt2_tiny", "gpt2_medium", "llama_1b"):
        inner = module.inner
        blocks = inner.transformer.h if model.startswith("gpt2") else inner.model.layers
        try:
            inner.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False})
            if getattr(inner, "is_gradient_checkpointing", True):
                return len(blocks)
        except Exception as error:  # noqa: BLE001 - fall back to wrapping the blocks
            print(f"gradient_checkpointing_enable failed ({error}); wrapping the blocks",
                  flush=True)
        containers = [blocks]
    elif model == "resnet50":
        containers = [module.layer1, module.layer2, module.layer3, module.layer4]
    elif model in ("vit_b_16", "vit_tiny"):
        containers = [module.encoder.layers]
    else:
        raise ValueError(f"no checkpoint blocks known for {model}")
    count = 0
    for container in containers:
        for i in range(len(container)):
            container[i] = Checkpointed(container[i])
            count += 1
    return count


def cmd_torch_one(args):
    import gc

    import numpy as np  # noqa: F401
    import torch
    import torch.nn.functional as F

    import gpu_bench

    on = args.tf32 == "on"
    if args.tf32 != "default":  # "default": PyTorch's own (cuDNN TF32 on, matmul TF32 off)
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on
        torch.set_float32_matmul_precision("high" if on else "highest")
    torch.backends.cudnn.benchmark = True
    torch._dynamo.config.cache_size_limit = 64
    model, batch, size, classes = BENCH[args.name]
    x_host, y_host = (torch.from_numpy(a) for a in make_batch(model, batch, size, classes))
    result = {"environment": gpu_bench.torch_environment(),
              "tf32": args.tf32 if args.tf32 == "default" else on, "runs": {},
              "precision": args.precision,
              "tf32_flags": {"matmul": torch.backends.cuda.matmul.allow_tf32,
                             "cudnn": torch.backends.cudnn.allow_tf32,
                             "float32_matmul_precision":
                                 torch.get_float32_matmul_precision()}}
    # Mixed precision: autocast (and a GradScaler with its defaults for fp16), channels-last
    # for the convolutional net, as PyTorch's AMP recipe has it.
    low = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    channels_last = low is not None and model == "resnet50"
    if channels_last:
        x_host = x_host.contiguous(memory_format=torch.channels_last)

    def save():
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1)

    def state_bytes(module, opt):
        params = sum(p.numel() * p.element_size() for p in module.parameters())
        buffers = sum(b.numel() * b.element_size() for b in module.buffers())
        opt_state = sum(v.numel() * v.element_size() for s in opt.state.values()
                        for v in s.values() if torch.is_tensor(v) and v.is_cuda)
        return params, buffers, opt_state

    for mode in args.modes:
        # One module and one compiled forward + loss per mode, shared by the optimizers.
        torch._dynamo.reset()
        # torch.compile's activation-memory budget (the min-cut partitioner recomputes until
        # the saved activations fit the fraction): the issue's "with budget 0.5" baseline.
        import torch._functorch.config as functorch_config

        # "compile-budget=B": budget B (one child process per budget, see cmd_device);
        # plain "compile-budget": --activation-budget.
        budget = None
        if mode.startswith("compile-budget"):
            budget = float(mode.split("=", 1)[1]) if "=" in mode else args.activation_budget
        functorch_config.activation_memory_budget = 1.0 if budget is None else budget
        module = build_module(model, size, classes).cuda().train()
        if channels_last:
            module = module.to(memory_format=torch.channels_last)
        blocks = checkpoint_blocks(module, model) if mode == "checkpoint" else 0

        def plain_loss(x, y):
            with torch.autocast("cuda", dtype=low, enabled=low is not None):
                logits = module(x)
                return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

        loss_fn = (torch.compile(plain_loss, dynamic=False) if mode.startswith("compile")
                   else plain_loss)
        for opt_name in args.optimizers:
            key = f"{mode}.{opt_name}"
            if time.time() > args.deadline:
                result["runs"][key] = {"error": "deadline"}
                continue
            try:
                module.zero_grad(set_to_none=True)
                if opt_name == "sgd":
                    opt = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)
                else:
                    # fused: one multi-tensor kernel, as PyTorch users run AdamW at its best
                    opt = torch.optim.AdamW(module.parameters(), lr=1e-4, weight_decay=0.01,
                                            fused=True)
                opt_step = opt.step
                if mode.startswith("compile") and args.compile_optimizer:
                    opt_step = torch.compile(opt.step, dynamic=False)
                scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")

                def step():
                    x = x_host.to("cuda")
                    y = y_host.to("cuda")
                    loss = loss_fn(x, y)
                    scaler.scale(loss).backward()
                    if scaler.is_enabled():
                        scaler.step(opt)  # syncs the host to read found_inf (unfused SGD)
                        scaler.update()
                    else:
                        opt_step()
                    opt.zero_grad(set_to_none=True)
                    return loss

                begin = time.time()
                first_loss = float(step())
                torch.cuda.synchronize()
                first_s = time.time() - begin
                if args.warm_only:
                    step()
                    torch.cuda.synchronize()
                    result["runs"][key] = {"warm_s": round(time.time() - begin, 1)}
                    print(f"warm {args.name} {key}: {time.time() - begin:.1f} s", flush=True)
                    save()
                    del opt, opt_step
                    gc.collect()
                    torch.cuda.empty_cache()
                    continue
                for _ in range(4):
                    step()
                torch.cuda.synchronize()
                gc.collect()
                torch.cuda.reset_peak_memory_stats()
                resident = torch.cuda.memory_allocated()
                step()
                torch.cuda.synchronize()
                peak = torch.cuda.max_memory_allocated()
                peak_reserved = torch.cuda.max_memory_reserved()
                free, total = torch.cuda.mem_get_info()
                params, buffers, opt_state = state_bytes(module, opt)
                start = torch.cuda.Event(enable_timing=True)
                stop = torch.cuda.Event(enable_timing=True)
                times = []
                for _ in range(args.runs):
                    start.record()
                    loss = step()
                    stop.record()
                    stop.synchronize()
                    times.append(start.elapsed_time(stop))
                state = params + buffers + params + opt_state  # + gradients (= parameters)
                result["runs"][key] = {
                    "median_ms": statistics.median(times), "min_ms": min(times),
                    "max_ms": max(times), "runs": args.runs, "first_step_s": round(first_s, 1),
                    "peak_allocated_bytes": peak, "peak_reserved_bytes": peak_reserved,
                    "resident_between_steps_bytes": resident,
                    "device_used_bytes": total - free, "param_bytes": params,
                    "buffer_bytes": buffers, "grad_bytes": params,
                    "optimizer_state_bytes": opt_state, "state_bytes": state,
                    "beyond_state_bytes": peak - state, "first_loss": first_loss,
                    "last_loss": float(loss), "precision": args.precision,
                    "channels_last": channels_last, "activation_memory_budget": budget,
                    "checkpointed_blocks": blocks,
                    "loss_scale": float(scaler.get_scale()) if scaler.is_enabled() else None}
                print(f"{args.name} {key} tf32={args.tf32}: "
                      f"{result['runs'][key]['median_ms']:.2f} ms, "
                      f"peak {peak / 2**20:.0f} MiB", flush=True)
                del opt, opt_step
            except Exception as error:  # noqa: BLE001 - recorded per run
                result["runs"][key] = {"error": f"{type(error).__name__}: {str(error)[:2000]}"}
                print(f"{args.name} {key}: FAILED {str(error)[:500]}", flush=True)
            gc.collect()
            torch.cuda.empty_cache()
            save()
        del module, loss_fn
        gc.collect()
        torch.cuda.empty_cache()
    save()
    return 0


# ----------------------------------------------------------------------------------------------
# curves (GPU): loss curves from the same initial weights


def cmd_curves(args):
    """memopt's fp32 / fp16 / bf16 programs (whichever the carry has) and PyTorch fp32 / AMP
    fp16 / AMP bf16, `--steps` steps each on the bench batch, from the same initial weights:
    memopt's --random-weights SEED written by --steps 0 --save-state and loaded into the
    PyTorch module by parameter name (the dynamo exporter names initializers by their
    state_dict key; unmatched parameters are counted in the result)."""
    import numpy as np

    carry = os.path.abspath(args.carry)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    work = os.path.join(args.work, "curves")
    os.makedirs(work, exist_ok=True)
    say = log_to(os.path.join(out, "curves_log.txt"))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = library_path() + ":" + env.get("LD_LIBRARY_PATH", "")
    result = {"steps": args.steps, "optimizer": args.optimizer, "configs": {}}
    exe_dir = link_executables(carry, args.work, result, say)
    path = os.path.join(out, "curves.json")
    for name in args.configs:
        model, batch, size, classes = BENCH[name]
        x, y = make_batch(model, batch, size, classes)
        xs, ys = os.path.join(work, f"{name}.x.npy"), os.path.join(work, f"{name}.y.npy")
        np.save(xs, x)
        np.save(ys, y)
        entry = result["configs"].setdefault(name, {"memopt": {}, "torch": {}})
        init = os.path.join(work, f"{name}.init")
        for precision in PRECISIONS:
            exe = os.path.join(exe_dir,
                               f"{name}.{args.optimizer}{precision_suffix(precision)}.cuda")
            if not os.path.exists(exe):
                entry["memopt"][precision] = {"error": "no executable (prepare and link it)"}
                continue
            if not os.path.exists(init):
                subprocess.run([exe, "--random-weights", str(SEED), "--input",
                                f"{input_name(model)}={xs}", "--input", f"labels={ys}",
                                "--steps", "0", "--save-state", init], env=env,
                               capture_output=True, text=True, timeout=300)
            log = os.path.join(work, f"{name}.{precision}.csv")
            code, text, _ = run_streamed(
                [exe, "--random-weights", str(SEED), "--input", f"{input_name(model)}={xs}",
                 "--input", f"labels={ys}", "--steps", str(args.steps), "--log", log],
                args.timeout_s, env)
            if code != 0:
                entry["memopt"][precision] = {"error": text[-2000:]}
                say(f"curves memopt {name} {precision}: FAILED\n{text[-1000:]}")
                continue
            rows = [line.split(",") for line in open(log).read().splitlines()[1:]]
            entry["memopt"][precision] = {
                "loss": [float(r[1]) for r in rows],
                "loss_scale": [float(r[2]) for r in rows] if rows and len(rows[0]) > 2 else None,
                "skipped_steps": int(rows[-1][3]) if rows and len(rows[0]) > 3 else 0}
            say(f"curves memopt {name} {precision}: {rows[0][1]} -> {rows[-1][1]}")
        for precision in ("fp32", "fp16", "bf16"):  # (tf32 would be fp32 again here)
            part = os.path.join(work, f"{name}.torch.{precision}.json")
            command = [sys.executable, os.path.abspath(__file__), "torch-curve", name,
                       "--init", init, "--out", part, "--steps", str(args.steps),
                       "--precision", precision, "--optimizer", args.optimizer]
            try:
                subprocess.run(command, timeout=args.timeout_s,
                               env=dict(os.environ, PYTHONUNBUFFERED="1"))
            except subprocess.TimeoutExpired:
                say(f"curves torch {name} {precision}: timeout")
            if os.path.exists(part):
                entry["torch"][precision] = json.load(open(part))
                losses = entry["torch"][precision].get("loss", [])
                if losses:
                    say(f"curves torch {name} {precision}: {losses[0]} -> {losses[-1]}")
        with open(path, "w") as handle:
            json.dump(result, handle)
    return 0


def cmd_torch_curve(args):
    """PyTorch's curve (fp32, or AMP fp16 with a GradScaler, or AMP bf16) from memopt's
    initial weights (the .npy files of --save-state, loaded by name)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    model, batch, size, classes = BENCH[args.name]
    module = build_module(model, size, classes).cuda().train()
    low = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    state = module.state_dict()
    loaded, missing = 0, []
    for key, tensor in state.items():
        file = os.path.join(args.init, "".join("_" if c in "/\\: " else c for c in key) +
                            ".npy")
        if os.path.exists(file):
            value = torch.from_numpy(np.load(file))
            if tuple(value.shape) == tuple(tensor.shape):
                tensor.copy_(value)
                loaded += 1
                continue
        missing.append(key)
    if model == "resnet50" and low is not None:
        module = module.to(memory_format=torch.channels_last)
    x_np, y_np = make_batch(model, batch, size, classes)
    x, y = torch.from_numpy(x_np).cuda(), torch.from_numpy(y_np).cuda()
    if model == "resnet50" and low is not None:
        x = x.contiguous(memory_format=torch.channels_last)
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)
    else:
        opt = torch.optim.AdamW(module.parameters(), lr=1e-4, weight_decay=0.01)
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")
    losses, scales = [], []
    for _ in range(args.steps):
        with torch.autocast("cuda", dtype=low, enabled=low is not None):
            logits = module(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))
        scales.append(float(scaler.get_scale()) if scaler.is_enabled() else None)
    with open(args.out, "w") as handle:
        json.dump({"loss": losses, "loss_scale": scales, "loaded_parameters": loaded,
                   "parameters_not_loaded": missing}, handle)
    return 0


def curves_svg(curves, path, width=720, height=300):
    """A plain SVG line chart per configuration: loss against step, one line per run."""
    colors = {"memopt.fp32": "#1f77b4", "memopt.fp16": "#d62728", "memopt.bf16": "#2ca02c",
              "torch.fp32": "#7f7f7f", "torch.fp16": "#ff9896", "torch.bf16": "#98df8a"}
    parts = []
    top = 0
    for name, entry in curves["configs"].items():
        lines = {f"{side}.{p}": run["loss"] for side in ("memopt", "torch")
                 for p, run in entry[side].items() if run.get("loss")}
        if not lines:
            continue
        values = [v for losses in lines.values() for v in losses if v == v]
        low, high = min(values), max(values)
        steps = max(len(v) for v in lines.values())
        parts.append(f'<text x="10" y="{top + 16}" font-size="14">{name}: loss over '
                     f'{steps} steps ({curves["optimizer"]})</text>')
        for k, (label, losses) in enumerate(lines.items()):
            points = " ".join(
                f"{60 + (width - 200) * i / max(steps - 1, 1):.1f},"
                f"{top + 30 + (height - 60) * (1 - (v - low) / max(high - low, 1e-12)):.1f}"
                for i, v in enumerate(losses) if v == v)
            parts.append(f'<polyline fill="none" stroke="{colors.get(label, "black")}" '
                         f'stroke-width="1.5" points="{points}"/>')
            parts.append(f'<text x="{width - 130}" y="{top + 40 + 16 * k}" font-size="12" '
                         f'fill="{colors.get(label, "black")}">{label}</text>')
        parts.append(f'<text x="10" y="{top + 34}" font-size="11">{high:.3g}</text>')
        parts.append(f'<text x="10" y="{top + height - 30}" font-size="11">{low:.3g}</text>')
        top += height
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{max(top, 1)}">'
           + "".join(parts) + "</svg>\n")
    with open(path, "w") as handle:
        handle.write(svg)


# ----------------------------------------------------------------------------------------------
# report (here)


def mib(n):
    return f"{n / 2**20:,.0f}"


def merge_devices(devices):
    """The device calls' results as one (a run with a median wins over a failed one)."""
    merged = {"memopt": {}, "torch": {}, "checks": {}, "gpu_check": None, "phases": []}
    for d in devices:
        for key, entry in d.get("memopt", {}).items():
            if "median_ms" in entry or key not in merged["memopt"]:
                merged["memopt"][key] = entry
        for key, entry in d.get("torch", {}).items():
            old = merged["torch"].setdefault(key, {"runs": {}})
            old.setdefault("environment", entry.get("environment"))
            old.setdefault("tf32_flags", entry.get("tf32_flags"))
            for mode, run in entry.get("runs", {}).items():
                if "median_ms" in run or mode not in old["runs"]:
                    old["runs"][mode] = run
        for key, entry in d.get("checks", {}).items():
            if entry.get("worst") or key not in merged["checks"]:
                merged["checks"][key] = entry
        if d.get("gpu_check"):
            merged["gpu_check"] = d["gpu_check"]
        merged["phases"].append(d.get("phases"))
        merged["nvidia_smi"] = d.get("nvidia_smi", merged.get("nvidia_smi"))
    return merged


def cmd_report(args):
    if args.remat:
        return cmd_report_remat(args)
    args.doc_out = args.doc_out or os.path.join(REPO, "docs", "training-benchmark.md")
    args.json_out = args.json_out or os.path.join(REPO, "bench", "results", "train.json")
    devices = [json.load(open(p)) for p in args.device_json]
    prepare = json.load(open(args.prepare_json))
    merged = merge_devices(devices)
    env = next((t.get("environment") for t in merged["torch"].values()
                if t.get("environment")), {})
    precision = next((d.get("precision") for d in devices if d.get("precision")), "fp32")
    budget_column = any(mode.startswith("compile-budget")
                        for t in merged["torch"].values() for mode in t.get("runs", {}))
    rows, tf32_rows = [], []
    for name in BENCH:
        for opt in OPTIMIZERS:
            key = f"{name}.{opt}"
            m = merged["memopt"].get(key, {})
            # TF32 off, else PyTorch's defaults (`--tf32 default`, what AMP runs used).
            t = (merged["torch"].get(f"{name}.tf32=off") or
                 merged["torch"].get(f"{name}.tf32=default", {})).get("runs", {})
            t32 = merged["torch"].get(f"{name}.tf32=on", {}).get("runs", {})
            e, c = t.get(f"eager.{opt}", {}), t.get(f"compile.{opt}", {})
            cb = (t.get(f"compile-budget.{opt}") or
                  t.get(f"compile-budget=0.5.{opt}", {}))
            e32, c32 = t32.get(f"eager.{opt}", {}), t32.get(f"compile.{opt}", {})
            suffix = precision_suffix(precision)
            rep = prepare["configs"].get(key + suffix, {}).get("report", {}).get("training",
                                                                                  {})

            def ms(r):
                return f"{r['median_ms']:.1f}" if "median_ms" in r else \
                    ("failed" if "error" in r else "—")

            def mb(r, k):
                return mib(r[k]) if k in r else "—"

            ratio = (f"{m['median_ms'] / c['median_ms']:.2f}"
                     if "median_ms" in m and "median_ms" in c else "—")
            mem_ok = ("yes" if "total_bytes" in m and "peak_allocated_bytes" in e and
                      "peak_allocated_bytes" in c and
                      m["total_bytes"] < min(e["peak_allocated_bytes"],
                                             c["peak_allocated_bytes"]) else
                      ("no" if "total_bytes" in m else "—"))
            rows.append(f"| {name} | {opt} | {mb(m, 'total_bytes')} | "
                        f"{mb(e, 'peak_allocated_bytes')} | {mb(c, 'peak_allocated_bytes')} | "
                        f"{mb(m, 'beyond_state_bytes')} | {mb(e, 'beyond_state_bytes')} | "
                        f"{mb(c, 'beyond_state_bytes')} | {ms(m)} | {ms(e)} | {ms(c)} | "
                        f"{ratio} | {mem_ok} | {mb(m, 'device_peak_used_bytes')} | "
                        f"{mb(e, 'device_used_bytes')} | {mb(c, 'device_used_bytes')} |" +
                        (f" {ms(cb)} | {mb(cb, 'peak_allocated_bytes')} | "
                         f"{mb(cb, 'beyond_state_bytes')} |" if budget_column else ""))
            tf32_rows.append(f"| {name} | {opt} | {ms(m)} (fp32) | {ms(e32)} | {ms(c32)} | "
                             f"{mb(e32, 'peak_allocated_bytes')} | "
                             f"{mb(c32, 'peak_allocated_bytes')} |")
            merged.setdefault("configs", {})[key] = {
                "memopt": m, "eager": e, "compile": c, "eager_tf32": e32,
                "compile_tf32": c32, "compile_budget": cb, "precision": precision,
                "memopt_report_training": rep}
    check_rows = []
    for name, check in merged["checks"].items():
        worst = check.get("worst") or {}
        big = check.get("worst_significant") or {}
        host, cuda = check.get("host", {}), check.get("cuda", {})
        total = check.get("global_rel_l2", float("nan"))
        status = ("ok" if big and big.get("rel_l2", 1) < 1e-4 else
                  ("FAILED: " + (cuda.get("log_tail") or host.get("log_tail") or "")[-300:]
                   .replace("\n", " ").replace("|", "/")) if not worst else "**too large**")
        check_rows.append(
            f"| {name} | {check.get('tensors', '—')} | {total:.1e} | "
            f"{big.get('rel_l2', float('nan')):.1e} (`{big.get('name', '—')}`) | "
            f"{worst.get('rel_l2', float('nan')):.1e} (`{worst.get('name', '—')}`, norm "
            f"{worst.get('host_norm', float('nan')):.1e}) | "
            f"{host.get('loss', '—')} | {cuda.get('loss', '—')} | {status} |")
    header = ("| model | optimizer | memopt total | eager peak | compile peak | memopt beyond "
              "state | eager beyond state | compile beyond state | memopt ms | eager ms | "
              "compile ms | memopt / compile | memory below both | memopt device used | "
              "eager device used | compile device used |" +
              (" compile (budget 0.5) ms | compile (budget 0.5) peak | compile (budget 0.5) "
               "beyond state |" if budget_column else "") + "\n"
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
              "---: | --- | ---: | ---: | ---: |" +
              (" ---: | ---: | ---: |" if budget_column else ""))
    if precision != "fp32":
        header = (f"memopt `--precision {precision}` against PyTorch autocast "
                  f"({precision}{', GradScaler' if precision == 'fp16' else ''}; ResNet-50 "
                  "channels-last):\n\n" + header)
    tf32_header = ("| model | optimizer | memopt ms | eager ms (TF32) | compile ms (TF32) | "
                   "eager peak (TF32) | compile peak (TF32) |\n"
                   "| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    check_header = ("| configuration | gradients | all gradients rel. L2 | worst tensor (norm >= "
                    "1e-4 of the largest) | worst tensor (any norm) | host loss | CUDA loss | "
                    "status |\n| --- | ---: | ---: | --- | --- | ---: | ---: | --- |")
    text = open(args.template).read()
    text = text.replace("@TABLE@", header + "\n" + "\n".join(rows))
    text = text.replace("@TF32@", tf32_header + "\n" + "\n".join(tf32_rows))
    text = text.replace("@CHECKS@", check_header + "\n" + "\n".join(check_rows))
    text = text.replace("@ENV@", ", ".join(f"{k} {v}" for k, v in env.items()) +
                        f"; nvidia-smi: {merged.get('nvidia_smi')}; memopt at "
                        f"{prepare.get('commit', '?')[:10]}")
    gc = merged["gpu_check"] or {}
    text = text.replace("@GPUCHECK@", f"exit {gc.get('exit')}, {gc.get('summary')}" +
                        ("" if not gc.get("failures") else
                         "; failing lines: " + "; ".join(f"`{f}`" for f in gc["failures"][:10])))
    notes = open(args.notes).read().strip() if args.notes else ""
    text = text.replace("@NOTES@", notes)
    if args.curves:
        curves = json.load(open(args.curves))
        svg = os.path.splitext(args.doc_out)[0] + "-curves.svg"
        curves_svg(curves, svg)
        lines = ["| config | run | first loss | last loss | skipped steps |",
                 "| --- | --- | ---: | ---: | ---: |"]
        for name, entry in curves["configs"].items():
            for side in ("memopt", "torch"):
                for p, run in entry[side].items():
                    losses = run.get("loss") or []
                    skipped = run.get("skipped_steps", "-")
                    lines.append(f"| {name} | {side} {p} | "
                                 f"{losses[0] if losses else run.get('error', '-')[:60]} | "
                                 f"{losses[-1] if losses else '-'} | {skipped} |")
        block = (f"Loss curves ({curves['steps']} steps, the same initial weights and batch; "
                 f"![curves]({os.path.basename(svg)})):\n\n" + "\n".join(lines))
        text = text.replace("@CURVES@", block) if "@CURVES@" in text else text + "\n" + block
    merged["curves"] = args.curves
    with open(args.doc_out, "w") as handle:
        handle.write(text)
    merged["prepare"] = prepare
    with open(args.json_out, "w") as handle:
        json.dump(merged, handle, indent=1)
    print(header + "\n" + "\n".join(rows))
    print(tf32_header + "\n" + "\n".join(tf32_rows))
    print(check_header + "\n" + "\n".join(check_rows))
    return 0


REMAT_DOC = """# Training under a memory budget: memopt's rematerialization against PyTorch

Written by `python3 bench/train_bench.py report --remat` (issue 17, "Benchmarks and targets",
GPU) from the JSON of the device calls; bench/results/train_remat.json holds every number, the
commands are in the script's docstring.

Device: @ENV@.

memopt `--precision @PRECISION@`; PyTorch fp32 with TF32 switches @TORCH_TF32@.

## What the budgets are

`memopt-compile --memory-budget BYTES` bounds memopt's packed arena alone (docs/remat.md,
"budget= vs arena-budget="): the weight region (parameters, optimizer state, BatchNorm
statistics, constants) is outside it. Besides activations (saved for backward, temporaries,
workspaces) the arena holds the gradients still alive at its peak (fused updates free the
others at once: the report's `training.gradient_bytes_at_peak`). So the unconstrained
*activation arena* is A = arena - gradients at the peak, and "F of it" is the budget
`gradients at the peak + F x A` (`remat_budget` in the script). An infeasible budget is shown
with the smallest arena memopt reached.

PyTorch, at comparable memory: `checkpoint` is eager mode with `torch.utils.checkpoint(...,
use_reentrant=False)` around each block (ResNet-50: each of the 16 bottleneck blocks; ViT:
each of the 12 encoder layers; GPT-2: each of the 12 transformer blocks, through
transformers' `gradient_checkpointing_enable`); `compile-budget=B` is `torch.compile` with
`torch._functorch.config.activation_memory_budget = B` (a fraction of the saved activations'
bytes, not of the whole step's memory), each B in its own process.

Columns: "step ms": median of the timed steps; "overhead": against memopt's unconstrained
step (memopt rows), eager (checkpoint) or torch.compile without a budget (compile-budget).
"allocated": memopt's weight region + arena + inputs + workspace, PyTorch's
`torch.cuda.max_memory_allocated()` over one step. "device peak": memopt's largest `total -
free` of `cudaMemGetInfo` during its timed steps, PyTorch's `total - free` after its measured
step (CUDA context, libraries and allocator caches included on both). "beyond state":
allocated minus the training state (PyTorch: parameters, buffers, gradients, optimizer state;
memopt: the weight region, so its gradients count as beyond state), and its share of the
same side's unconstrained run. "activation arena", "recomputed", "recomputed FLOPs" and
"estimated time" come from memopt's compile report (FLOPs of the clones over the step's, and
their roofline time over the step's on an H100).

@TABLES@

## Against issue 17's targets

@TARGETS@

@NOTES@
"""


def cmd_report_remat(args):
    """Issue 17's GPU table: per model, memopt unconstrained and under each budget against
    PyTorch eager, checkpoint, torch.compile and torch.compile with activation budgets."""
    args.doc_out = args.doc_out or os.path.join(REPO, "docs", "training-benchmark-remat.md")
    args.json_out = args.json_out or os.path.join(REPO, "bench", "results",
                                                  "train_remat.json")
    devices = [json.load(open(p)) for p in args.device_json]
    prepare = json.load(open(args.prepare_json))
    merged = merge_devices(devices)
    precision = next((d.get("precision") for d in devices if d.get("precision")), "fp32")
    suffix = precision_suffix(precision)
    tf32 = args.torch_tf32 or next(
        (v for v in ("default", "off", "on")
         if any(k.endswith(f".tf32={v}") for k in merged["torch"])), "off")
    env = next((t.get("environment") for t in merged["torch"].values()
                if t.get("environment")), {})
    flags = next((t.get("tf32_flags") for k, t in merged["torch"].items()
                  if k.endswith(f".tf32={tf32}") and t.get("tf32_flags")), None)

    def ms(r):
        if "median_ms" in r:
            return f"{r['median_ms']:.1f}"
        if r.get("error") == "deadline":
            return "not run (the call's deadline)"
        return "failed" if "error" in r else "—"

    def mb(n):
        return "—" if n is None else mib(n)

    def pct(x, signed=False):
        return "—" if x is None else (f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%")

    def ratio(a, b, key):
        return (a[key] / b[key] - 1) if key in a and key in b and b[key] else None

    def share(a, b, key):
        return a[key] / b[key] if key in a and key in b and b[key] else None

    tables, targets, models = [], [], {}
    for name in BENCH:
        for opt in OPTIMIZERS:
            base_key = f"{name}.{opt}"
            t = merged["torch"].get(f"{name}.tf32={tf32}", {}).get("runs", {})
            if not any(k.startswith(base_key) for k in merged["memopt"]) and not any(
                    k.endswith(f".{opt}") for k in t):
                continue
            variants = sorted(
                ((c.get("remat_budget", {}).get("fraction"), k[len(base_key + suffix):])
                 for k, c in prepare.get("configs", {}).items()
                 if k.startswith(base_key + suffix + ".remat") and c.get("remat_budget")),
                key=lambda fv: -fv[0])
            base = merged["memopt"].get(base_key, {})
            base_prep = prepare.get("configs", {}).get(base_key + suffix, {})
            rows, entry = [], {"memopt": {}, "torch": {}}
            for fraction, variant in [(None, "")] + variants:
                run = merged["memopt"].get(base_key + variant, {})
                prep = prepare.get("configs", {}).get(base_key + suffix + variant, {})
                report = prep.get("report", {})
                remat = report.get("remat") or {}
                training = report.get("training") or {}
                budget = prep.get("remat_budget") or {}
                act = (report["arena_bytes"] - training.get("gradient_bytes_at_peak", 0)
                       if "arena_bytes" in report else None)
                flops = (remat["added_flops"] / remat["step_flops"]
                         if remat.get("step_flops") else (0.0 if report else None))
                label = "memopt unconstrained" if fraction is None else \
                    f"memopt {100 * fraction:g}% of the activation arena"
                if "error" in prep and fraction is not None:
                    reached = prep.get("smallest_arena_bytes")
                    what = ("infeasible" if reached is None else
                            f"infeasible: smallest arena {mib(reached)} MiB "
                            f"({prep.get('smallest_arena_recomputed_ops')} ops recomputed)")
                    rows.append(f"| {label} | {mb(budget.get('budget_bytes'))} | {what} |"
                                + " — |" * 9)
                    entry["memopt"][variant or "unconstrained"] = {
                        "fraction": fraction, "infeasible": what, "budget": budget,
                        "error": prep.get("error")}
                    continue
                over = ratio(run, base, "median_ms") if fraction is not None else None
                rows.append(
                    f"| {label} | {mb(budget.get('budget_bytes'))} | {ms(run)} | "
                    f"{pct(over, True) if fraction is not None else '—'} | "
                    f"{mb(run.get('total_bytes'))} | {mb(run.get('device_peak_used_bytes'))} | "
                    f"{mb(run.get('beyond_state_bytes'))} | "
                    f"{pct(share(run, base, 'beyond_state_bytes'))} | {mb(act)} | "
                    f"{remat.get('recomputed_ops', 0 if report else '—')} | {pct(flops)} | "
                    f"{pct(remat.get('added_time_fraction', 0.0) if report else None)} |")
                entry["memopt"][variant or "unconstrained"] = {
                    "fraction": fraction, "run": run, "overhead": over,
                    "beyond_state_share": share(run, base, "beyond_state_bytes"),
                    "activation_arena_bytes": act, "recomputed_flops_share": flops,
                    "budget": budget, "remat": {k: v for k, v in remat.items()
                                                if k != "recomputed"},
                    "compile_s": prep.get("compile_s")}
            modes = ["eager", "checkpoint", "compile"] + sorted(
                {k.rsplit(".", 1)[0] for k in t if k.startswith("compile-budget")},
                key=lambda m: -float(m.split("=")[1]) if "=" in m else 0)
            for mode in modes:
                run = t.get(f"{mode}.{opt}")
                if run is None:
                    continue
                ref = t.get(("compile" if mode.startswith("compile") else "eager") + f".{opt}",
                            {})
                over = ratio(run, ref, "median_ms") if mode not in ("eager", "compile") \
                    else None
                beyond = share(run, ref, "beyond_state_bytes")
                rows.append(
                    f"| PyTorch {mode} | — | {ms(run)} | "
                    f"{pct(over, True) if over is not None else '—'} | "
                    f"{mb(run.get('peak_allocated_bytes'))} | "
                    f"{mb(run.get('device_used_bytes'))} | "
                    f"{mb(run.get('beyond_state_bytes'))} | {pct(beyond)} |" + " — |" * 4)
                entry["torch"][mode] = {"run": run, "overhead": over,
                                        "beyond_state_share": beyond}
            models[base_key] = entry
            tables.append(
                f"### {name}, {opt}\n\n| run | budget MiB | step ms | overhead | allocated MiB "
                "| device peak MiB | beyond state MiB | beyond state vs unconstrained | "
                "activation arena MiB | recomputed ops | recomputed FLOPs | estimated time |\n"
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
                "---: |\n" + "\n".join(rows))
            # The targets: +5% at 50%, +15% at 25%, below checkpointing's overhead at the
            # same memory (memory compared as shares of each side's own unconstrained run).
            parts = []
            for variant, m in entry["memopt"].items():
                limit = {0.5: 0.05, 0.25: 0.15}.get(m.get("fraction"))
                if m.get("fraction") is None:
                    continue
                if m.get("overhead") is None:
                    parts.append(f"at {100 * m['fraction']:g}%: " +
                                 m.get("infeasible", "not measured"))
                    continue
                parts.append(f"at {100 * m['fraction']:g}%: {pct(m['overhead'], True)}" +
                             (f" (target <= +{100 * limit:g}%: "
                              f"{'met' if m['overhead'] <= limit else 'not met'})"
                              if limit is not None else ""))
            check = entry["torch"].get("checkpoint")
            line = f"- {name} {opt}: memopt " + ("; ".join(parts) or "no budgeted run")
            if check and check.get("overhead") is not None and check.get("beyond_state_share"):
                # memopt's run with the least overhead whose beyond-state share is at most
                # checkpointing's.
                fits = [(v, m) for v, m in entry["memopt"].items()
                        if m.get("fraction") is not None and m.get("overhead") is not None
                        and m.get("beyond_state_share") is not None
                        and m["beyond_state_share"] <= check["beyond_state_share"]]
                line += (f". PyTorch checkpoint: {pct(check['overhead'], True)} at "
                         f"{pct(check['beyond_state_share'])} of eager's beyond-state bytes")
                if fits:
                    v, m = min(fits, key=lambda vm: vm[1]["overhead"])
                    line += (f"; memopt at {pct(m['beyond_state_share'])} of its own "
                             f"({v.lstrip('.')}): {pct(m['overhead'], True)}, "
                             f"{'below' if m['overhead'] < check['overhead'] else 'not below'}"
                             " checkpointing's overhead")
                else:
                    line += "; no memopt run at that memory share or below"
            targets.append(line + ".")
    text = REMAT_DOC.replace("@TABLES@", "\n\n".join(tables) or "(no runs)")
    text = text.replace("@TARGETS@", "\n".join(targets) or "(no runs)")
    text = text.replace("@PRECISION@", precision)
    text = text.replace("@TORCH_TF32@", f"'{tf32}'" + (
        f" (matmul {flags.get('matmul')}, cuDNN {flags.get('cudnn')})" if flags else ""))
    text = text.replace("@ENV@", ", ".join(f"{k} {v}" for k, v in env.items()) +
                        f"; nvidia-smi: {merged.get('nvidia_smi')}; memopt at "
                        f"{prepare.get('commit', '?')[:10]}")
    text = text.replace("@NOTES@", open(args.notes).read().strip() if args.notes else "")
    with open(args.doc_out, "w") as handle:
        handle.write(text)
    with open(args.json_out, "w") as handle:
        json.dump({"precision": precision, "torch_tf32": tf32, "models": models,
                   "merged": merged, "prepare": prepare}, handle, indent=1)
    print("\n\n".join(tables))
    print("\n".join(targets))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("--out", required=True)
    p.add_argument("--only", nargs="*")
    p = sub.add_parser("export-one")
    for a in ("name", "model"):
        p.add_argument(a)
    for a in ("batch", "size", "classes"):
        p.add_argument(a, type=int)
    p.add_argument("work")
    p = sub.add_parser("prepare")
    p.add_argument("--graphs", required=True)
    p.add_argument("--dest", required=True)
    p.add_argument("--work", default=os.path.join(REPO, "build-train", "work"))
    p.add_argument("--compile", default=os.path.join(REPO, "build", "bin", "memopt-compile"))
    p.add_argument("--only", nargs="*")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--skip-runtime", action="store_true")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS,
                   help="memopt-compile --precision (mixed-precision training for fp16/bf16; "
                        "tf32: f32 tensors, TF32 math in convolutions and matrix products)")
    p.add_argument("--budget-fractions", nargs="*", type=float, default=[],
                   help="also compile each configuration with --memory-budget = gradients "
                        "alive at the unconstrained peak + F x the unconstrained activation "
                        "arena (issue 17; carry names NAME.OPT[.PREC].rematPCT)")
    p.add_argument("--remat-allow", help="memopt-compile --remat-allow KIND,... (default: "
                                         "memopt's, every op with a cost)")
    p.add_argument("--remat-time-limit", type=float,
                   help="memopt-compile --remat-time-limit S (default: memopt's)")
    p.add_argument("--remat-kernel-times", metavar="DIR",
                   help="price recomputations by measured kernel times: DIR/times_NAME.OPT"
                        "[.PREC].json of a `device --profile` call (the unconstrained "
                        "program's --profile-times), where DIR has one")
    p.add_argument("--remat-max-computations", type=int,
                   help="memopt-compile --remat-max-computations C (default: memopt's, 2)")
    p.add_argument("--remat-compile-timeout-s", type=float, default=3600,
                   help="stop one budgeted memopt-compile after this long (recorded as failed)")
    p.add_argument("--remat-only", action="store_true",
                   help="keep the unconstrained programs already in the carry (their reports "
                        "in DEST/prepare.json give the budgets); compile and build only the "
                        "budgeted ones")
    p = sub.add_parser("device")
    p.add_argument("--carry", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/train_bench")
    p.add_argument("--configs", nargs="*", default=list(BENCH))
    p.add_argument("--checks", nargs="*", default=list(CHECKS))
    p.add_argument("--dump-checks", nargs="*", default=[],
                   help="check configurations compared op by op (--dump-ops)")
    p.add_argument("--profile", nargs="*", default=[],
                   help="NAME.OPT configurations timed op by op (--profile)")
    p.add_argument("--optimizers", nargs="*", default=list(OPTIMIZERS))
    p.add_argument("--modes", nargs="*",
                   help="PyTorch modes: eager, checkpoint (eager, torch.utils.checkpoint per "
                        "block), compile, compile-budget (torch.compile with an activation "
                        "memory budget; see --activation-budgets) (default: eager and "
                        "compile; with --precision fp16/bf16 also compile-budget)")
    p.add_argument("--activation-budgets", nargs="*", type=float, default=[],
                   help="compile-budget once per value of torch._functorch.config."
                        "activation_memory_budget, each in its own child process (default: "
                        "0.5 only)")
    p.add_argument("--budget-fractions", nargs="*", type=float, default=[],
                   help="also run the carry's programs compiled under these budgets "
                        "(prepare --budget-fractions), after each unconstrained one; and the "
                        "gradient checks of budgeted check programs where the carry has them")
    p.add_argument("--skip-memopt", action="store_true",
                   help="no memopt --bench runs (a call for PyTorch alone)")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS,
                   help="run the carry's programs of this precision; PyTorch with autocast "
                        "(+ GradScaler for fp16)")
    p.add_argument("--tf32", nargs="*", default=["off", "on"], choices=TF32_SETTINGS,
                   help="PyTorch's TF32 settings, one pass each (the first with every mode, "
                        "later ones eager modes only unless --tf32-compile); default = "
                        "PyTorch's defaults (cuDNN TF32 on, matmul TF32 off)")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--memopt-timeout-s", type=json.loads,
                   default={"resnet50": 90, "vit_b_16": 60, "gpt2": 60})
    p.add_argument("--deadline-s", type=float, default=400)
    p.add_argument("--gpu-check-cap-s", type=float, default=200)
    p.add_argument("--warm-cap-s", type=float, default=200)
    p.add_argument("--skip-gpu-check", action="store_true")
    p.add_argument("--skip-torch", action="store_true")
    p.add_argument("--no-warm", action="store_true")
    p.add_argument("--tf32-compile", action="store_true",
                   help="torch.compile with TF32 on too (its own cold compile)")
    p = sub.add_parser("torch-one")
    p.add_argument("name")
    p.add_argument("--out", required=True)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--tf32", default="off", choices=TF32_SETTINGS)
    p.add_argument("--deadline", type=float, default=time.time() + 3600)
    p.add_argument("--optimizers", nargs="*", default=list(OPTIMIZERS))
    p.add_argument("--modes", nargs="*", default=["eager", "compile"])
    p.add_argument("--warm-only", action="store_true")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument("--activation-budget", type=float, default=0.5,
                   help="torch._functorch.config.activation_memory_budget of compile-budget")
    p.add_argument("--compile-optimizer", action="store_true",
                   help="also torch.compile optimizer.step (slow to compile)")
    p = sub.add_parser("curves")
    p.add_argument("--carry", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/train_bench")
    p.add_argument("--configs", nargs="*", default=["gpt2_b8"])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--optimizer", default="sgd", choices=list(OPTIMIZERS))
    p.add_argument("--timeout-s", type=float, default=300)
    p = sub.add_parser("torch-curve")
    p.add_argument("name")
    p.add_argument("--init", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument("--optimizer", default="sgd", choices=list(OPTIMIZERS))
    p = sub.add_parser("report")
    p.add_argument("--device-json", nargs="+", required=True)
    p.add_argument("--prepare-json", required=True)
    p.add_argument("--notes")
    p.add_argument("--template", default=os.path.join(REPO, "bench", "train_bench_template.md"))
    p.add_argument("--doc-out", help="default docs/training-benchmark.md (with --remat: "
                                      "docs/training-benchmark-remat.md)")
    p.add_argument("--json-out", help="default bench/results/train.json (with --remat: "
                                       "bench/results/train_remat.json)")
    p.add_argument("--remat", action="store_true",
                   help="issue 17's table: memopt under budgets against PyTorch's "
                        "checkpointing and torch.compile's activation budget")
    p.add_argument("--torch-tf32", choices=TF32_SETTINGS,
                   help="with --remat: which PyTorch TF32 pass to show (default: 'default' "
                        "if measured, else off, else on)")
    p.add_argument("--curves", help="curves.json of a `curves` device call: a plot and a table")
    args = parser.parse_args(argv)
    if args.command == "export-one":
        return export_one(args.name, args.model, args.batch, args.size, args.classes,
                          args.work) or 0
    if args.command == "device" and not args.modes:
        args.modes = ["eager", "compile"] + (["compile-budget"] if args.precision
                                             not in ("fp32", "tf32") else [])
    if args.command == "device" and args.activation_budgets:
        expanded = [f"compile-budget={b:g}" for b in args.activation_budgets]
        args.modes = [m for m in args.modes if m != "compile-budget"] + \
            ([] if "compile-budget" not in args.modes else expanded)
    return {"export": cmd_export, "prepare": cmd_prepare, "device": cmd_device,
            "torch-one": cmd_torch_one, "report": cmd_report, "curves": cmd_curves,
            "torch-curve": cmd_torch_curve}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
