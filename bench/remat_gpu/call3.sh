#!/bin/bash
# Third device call (carry .dev-c3 = `train_bench.py prepare` of a9f83ba: tf32 and fp16, SGD
# momentum, no budgets):
#   1. the kernel suite CUDA vs host (scripts/gpu_check.sh) in the background;
#   2. tf32: memopt's three unconstrained steps timed and profiled, each node's forward time
#      written as times_NAME.sgd.tf32.json (--profile-times) for `prepare --remat-kernel-times`;
#   3. fp16: issue 16's table: memopt against PyTorch AMP eager, torch.compile and
#      torch.compile with activation_memory_budget 0.5 (ResNet-50 channels-last), profiles.
# Everything lands in $OUT/call3.tar.gz.
# Usage: bash bench/remat_gpu/call3.sh
set -u
O=/tmp/c3; mkdir -p $O/tf32 $O/fp16 $OUT
CL=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])')/lib
( cd .dev-c3/src && LD_LIBRARY_PATH=$CL:${LD_LIBRARY_PATH:-} SKIP_PERF=1 SKIP_EXAMPLE=1 CUDA_ARCH=90 JOBS=8 \
    timeout 400 bash scripts/gpu_check.sh /tmp/rt-check > $O/gpu_check.txt 2>&1; echo "gpu_check rc=$?" >> $O/gpu_check.txt ) &
CHECK=$!
timeout 200 python3 .dev-c3/train_bench.py device --carry .dev-c3 --out $O/tf32 --precision tf32 \
  --optimizers sgd --checks --skip-gpu-check --no-warm --skip-torch --runs 15 --deadline-s 180 \
  --profile resnet50_b64.sgd vit_b_16_b32.sgd gpt2_b8.sgd > $O/tf32.txt 2>&1
echo "tf32 rc=$?"; grep -E "^memopt" $O/tf32/device_log.txt | cut -c1-160; ls $O/tf32
wait $CHECK; grep -E "^FAIL|passed, |rc=" $O/gpu_check.txt | tail -5
timeout 380 python3 .dev-c3/train_bench.py device --carry .dev-c3 --out $O/fp16 --precision fp16 \
  --optimizers sgd --checks --skip-gpu-check --tf32 default --modes eager compile compile-budget \
  --warm-cap-s 240 --runs 15 --deadline-s 360 --profile vit_b_16_b32.sgd > $O/fp16.txt 2>&1
echo "fp16 rc=$?"; grep -E "^memopt|^torch" $O/fp16/device_log.txt | cut -c1-160
grep -E "profile-kind" $O/fp16/profile_vit* | head -14
(cd $O && tar czf $OUT/call3.tar.gz .)
