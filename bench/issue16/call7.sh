#!/bin/bash
# Device call 7 of issue 16 (carry .dev-c7 = `train_bench.py prepare --precision fp16
# --budget-fractions 0.5`, then 0.57 for ResNet-50 and 0.68 for ViT-B/16 (`--remat-only`), at
# the convolution-workspace-floor commit): the fp16 table, memopt unconstrained and under
# the budgets against PyTorch AMP eager, torch.compile AMP and torch.compile AMP with
# activation_memory_budget 0.5 (ResNet-50 channels-last), same call; profiles of ResNet-50
# and ViT-B/16. Nothing else runs on the GPU (call 5 ran the kernel suite beside it).
# Everything lands in $OUT/call7.tar.gz.
# Usage: CARRY=.dev-c7 PREC=fp16 bash bench/issue16/call7.sh (call 8: CARRY=.dev-c8 PREC=bf16,
# .dev-c8 = `prepare --precision bf16`, no budgets)
set -u
C=${CARRY:-.dev-c7}; P=${PREC:-fp16}; O=/tmp/c7; mkdir -p $O/$P $OUT
timeout 580 python3 $C/train_bench.py device --carry $C --out $O/$P --precision $P \
  --budget-fractions 0.5 0.57 0.68 --optimizers sgd --checks --skip-gpu-check --tf32 default \
  --modes eager compile compile-budget --warm-cap-s 260 --runs 15 --deadline-s 560 \
  --profile resnet50_b64.sgd vit_b_16_b32.sgd > $O/$P.txt 2>&1
echo "$P rc=$?"
grep -E "^memopt|^torch" $O/$P/device_log.txt | cut -c1-170
grep -hE "profile-kind" $O/$P/profile_* | head -24
(cd $O && tar czf $OUT/call7.tar.gz .)
