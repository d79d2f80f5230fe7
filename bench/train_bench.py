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
  report   (here)    docs/training-benchmark.md and train.json (suite `train` of bench/run.py)
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
        --json-out OUT/train_amp.json --curves OUT/curves.json

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
its file (`--remat-kernel-times`; the run behind docs/training-benchmark-remat.md was
bench/remat_gpu/call3.sh and call4.sh, notes in bench/remat_gpu/notes.md, at commit d9a817f).
`report --remat` writes docs/training-benchmark-remat.md and train_remat.json (recorded by
`bench/run.py report --suite train_remat`; a table per model; the targets: +5% at 50%, +15% at
25%, below checkpointing's overhead at the same share of beyond-state memory). Commands:

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

Issue 26's training benchmark (bench/run.py's suite `issue26`, docs/gpu-benchmark.md "Issue 26
benchmarks"): ViT-B/16 b32, GPT-2 8 x 512, GPT-2 medium 4 x 1024 and ResNet-50 b64 in fp16 and
bf16 against torch.compile AMP in the same call. `prepare --graphs` takes the export call's
train_graphs.tar.gz (graphs without .data files get filled weights) and `--layout` (recorded
per program in prepare.json with memopt-layout's line); `device --hold-torch` starts one
PyTorch process per configuration, mode and optimizer that compiles beside the checks, holds
its compiled step while memopt's runs have the GPU, and is measured after them without a second
compile; `--warm-precisions fp16 bf16` fills Inductor's cache for the other precision too, so
that the bf16 pass that follows on the same machine compiles from it (`--no-warm`).

The run behind docs/training-benchmark.md (device calls 3 and 4 of the raw folder
bench/results/train_raw, removed from the tree after commit d9a817f):

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
    python3 bench/train_bench.py report --device-json RAW/call3/device.json \
        RAW/call4/device.json --prepare-json RAW/call4/prepare.json \
        --notes bench/train_bench_notes.md   # RAW: bench/results/train_raw at commit d9a817f
"""

import argparse
import json
import os
import sys
import time

# The code is the package next to this file (bench/train_bench/, or the carry's copy that
# `prepare` writes beside its copy of this file), found before the checkout's bench/.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from train_bench.configs import (BENCH, CHECKS, OPTIMIZERS, PRECISIONS, REPO,  # noqa: E402
                                 TF32_SETTINGS)
from train_bench.curves import cmd_curves, cmd_torch_curve  # noqa: E402
from train_bench.device import cmd_device, cmd_torch_one  # noqa: E402
from train_bench.export import cmd_export, export_one  # noqa: E402
from train_bench.prepare import cmd_prepare  # noqa: E402
from train_bench.report import cmd_report  # noqa: E402


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
    p.add_argument("--graphs", required=True,
                   help="the folder of NAME.onnx graphs, or a .tar.gz of them; graphs without "
                        "their .data file get filled weights (python/models/fill_weights.py)")
    p.add_argument("--dest", required=True)
    p.add_argument("--work", default=os.path.join(REPO, "build-train", "work"))
    p.add_argument("--compile", default=os.path.join(REPO, "build", "bin", "memopt-compile"))
    p.add_argument("--only", nargs="*")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--skip-runtime", action="store_true")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS,
                   help="memopt-compile --precision (mixed-precision training for fp16/bf16; "
                        "tf32: f32 tensors, TF32 math in convolutions and matrix products)")
    p.add_argument("--layout", choices=("auto", "nchw", "nhwc"),
                   help="memopt-compile --layout (default: memopt's, auto); prepare.json "
                        "records the layout each program got (training programs follow "
                        "the same policy as inference, docs/layout.md \"Training\")")
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
    p.add_argument("--hold-torch", action="store_true",
                   help="PyTorch in processes that compile beside the checks (one per "
                        "configuration, mode and optimizer; --compile-jobs at a time, stopped "
                        "at --warm-cap-s) and are measured after memopt's runs without a "
                        "second compile; the first --tf32 setting only")
    p.add_argument("--compile-jobs", type=int, default=4,
                   help="with --hold-torch: processes compiling at a time")
    p.add_argument("--warm-precisions", nargs="*", choices=PRECISIONS,
                   help="torch.compile warm-ups for these precisions (default: --precision's), "
                        "so that a later call for another precision on this machine can run "
                        "with --no-warm")
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
    p.add_argument("--hold", metavar="PREFIX",
                   help="after the first (compiling) step, create PREFIX.ready and wait for "
                        "PREFIX.go before measuring (device --hold-torch); one mode and one "
                        "optimizer")
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
    p.add_argument("--json-out", help="default .dev-bench/train/raw/train.json (with --remat: "
                                       ".dev-bench/train_remat/raw/train_remat.json)")
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
