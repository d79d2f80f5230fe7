#!/bin/bash
# Device call 5 of issue 16 (carry .dev-c5 = `train_bench.py prepare --precision fp16
# --budget-fractions 0.5`, then 0.58 for ResNet-50 and 0.68 for ViT-B/16 (`--remat-only`), at the relu_grad / vectorized batch-norm commit):
#   1. the kernel suite CUDA vs host (scripts/gpu_check.sh) in the background, during the
#      torch.compile warm-ups;
#   2. fp16: memopt unconstrained and under the budgets against PyTorch AMP eager,
#      torch.compile AMP and torch.compile AMP with activation_memory_budget 0.5
#      (ResNet-50 channels-last), profiles of ResNet-50 and ViT-B/16.
# Everything lands in $OUT/call5.tar.gz.
# Usage: bash bench/issue16/call5.sh
set -u
C=${CARRY:-.dev-c5}; O=/tmp/c5; mkdir -p $O/fp16 $OUT
CL=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])')/lib
( cd $C/src && LD_LIBRARY_PATH=$CL:${LD_LIBRARY_PATH:-} SKIP_PERF=1 SKIP_EXAMPLE=1 CUDA_ARCH=90 JOBS=8 \
    timeout 300 bash scripts/gpu_check.sh /tmp/rt-check > $O/gpu_check.txt 2>&1; echo "gpu_check rc=$?" >> $O/gpu_check.txt ) &
timeout 560 python3 $C/train_bench.py device --carry $C --out $O/fp16 --precision fp16 \
  --budget-fractions 0.5 0.58 0.68 --optimizers sgd --checks --skip-gpu-check --tf32 default \
  --modes eager compile compile-budget --warm-cap-s 260 --runs 15 --deadline-s 540 \
  --profile resnet50_b64.sgd vit_b_16_b32.sgd > $O/fp16.txt 2>&1
echo "fp16 rc=$?"; wait
grep -E "^FAIL|passed, |failed|rc=" $O/gpu_check.txt | tail -8
grep -E "^memopt|^torch" $O/fp16/device_log.txt | cut -c1-170
grep -hE "profile-kind" $O/fp16/profile_* | head -30
(cd $O && tar czf $OUT/call5.tar.gz .)
