#!/bin/bash
# Third call (docs/gpu-benchmark.md, "Data movement and the f16 attention backward"): PyTorch on
# the same GPU as calls 1, 2 and 4: Swin-T b32 inference (default fp32 eager, autocast fp16
# eager and torch.compile, bench/gpu_bench_precision.py torch-one) and the ViT-B/16 b32 and GPT-2
# 8 x 512 training steps with AMP fp16 + GradScaler, SGD momentum (bench/train_bench.py
# torch-one; torch.compile for GPT-2 only: each cold compile of a training step takes minutes).
export PYTHONUNBUFFERED=1
cd bench
timeout 110 python3 gpu_bench_precision.py torch-one swin_t --out $OUT/torch_swin.json --runs 30 \
  --modes eager_fp32 eager_fp16 compile_fp16 2>&1 | tail -3
timeout 60 python3 train_bench.py torch-one vit_b_16_b32 --out $OUT/torch_vit.json --precision fp16 \
  --optimizers sgd --modes eager 2>&1 | tail -3
timeout 150 python3 train_bench.py torch-one gpt2_b8 --out $OUT/torch_gpt2.json --precision fp16 \
  --optimizers sgd --modes eager compile 2>&1 | tail -4
