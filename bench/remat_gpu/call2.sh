#!/bin/bash
# Second device call (carry .dev-rm = `train_bench.py prepare` of this session: tf32 with
# --budget-fractions 0.5 0.25 --remat-max-computations 3, and fp16, SGD momentum):
#   1. issue 17's table, tf32: memopt unconstrained / 50% / 25% for the three models, PyTorch
#      eager and torch.utils.checkpoint per block (TF32 as PyTorch's defaults); op profiles of
#      the unconstrained tf32 programs;
#   2. the fp16 programs timed and profiled (no PyTorch: issue 16's ViT and ResNet-50 gaps).
# Everything lands in $OUT/call2.tar.gz (the call returns at most 8 files).
# Usage: bash bench/remat_gpu/call2.sh
set -u
O=/tmp/c2; mkdir -p $O/tf32 $O/fp16 $OUT
python3 .dev-rm/train_bench.py device --carry .dev-rm --out $O/tf32 --precision tf32 \
  --budget-fractions 0.5 0.25 --optimizers sgd --checks --skip-gpu-check --no-warm \
  --tf32 default --modes eager checkpoint --runs 15 --deadline-s 380 \
  --profile resnet50_b64.sgd vit_b_16_b32.sgd gpt2_b8.sgd > $O/tf32.txt 2>&1
echo "tf32 rc=$?"; grep -E "median|ms|MiB" $O/tf32/device_log.txt | grep -v "^profile" | tail -30 | cut -c1-200
python3 .dev-rm/train_bench.py device --carry .dev-rm --out $O/fp16 --precision fp16 \
  --optimizers sgd --checks --skip-gpu-check --no-warm --skip-torch --runs 15 --deadline-s 120 \
  --profile resnet50_b64.sgd vit_b_16_b32.sgd gpt2_b8.sgd > $O/fp16.txt 2>&1
echo "fp16 rc=$?"; grep -E "median|ms|MiB" $O/fp16/device_log.txt | grep -v "^profile" | tail -8 | cut -c1-200
for f in $O/fp16/profile_*; do echo "== $f"; grep -E "profile-(kind|op)" $f | head -24; done
(cd $O && tar czf $OUT/call2.tar.gz .)
