#!/bin/bash
# Device call 6 of issue 16: ResNet-50's fp16 step A/B, with nothing else on the GPU.
# Carry .dev-ab: old = call 3's program and runtime (a9f83ba), new = call 5's (relu_grad,
# vectorized batch norm, tiled max-pool gradient), mix = the old program linked with the new
# runtime (the kernels alone changed, not the plan). Each: `device --skip-torch` (18 steps,
# --bench 15, profile), then one step with MEMOPT_CONV_LOG=1 (cuDNN's choice per call site).
# Everything lands in $OUT/call6.tar.gz.
set -u; n=0
O=/tmp/c6; mkdir -p $O $OUT
[ -d .dev-ab/mix/rt ] || cp -r .dev-ab/new/rt .dev-ab/mix/
for v in old new mix new old; do
  mkdir -p $O/$v
  timeout 150 python3 .dev-ab/train_bench.py device --carry .dev-ab/$v --out $O/$v/run$((++n)) \
    --work /tmp/tb-$v --precision fp16 --configs resnet50_b64 --optimizers sgd --checks \
    --skip-gpu-check --skip-torch --no-warm --runs 15 --deadline-s 140 \
    --profile resnet50_b64.sgd > $O/$v/run$n.txt 2>&1
  grep -E "^memopt" $O/$v/run$n/device_log.txt | cut -c1-150 | sed "s/^/$v: /"
  grep -E "profile-kind" $O/$v/run$n/profile_* | head -8 | sed "s/^/$v: /"
done
for v in old new mix; do
  MEMOPT_CONV_LOG=1 LD_LIBRARY_PATH=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])')/lib:${LD_LIBRARY_PATH:-} \
    timeout 60 /tmp/tb-$v/bin/resnet50_b64.sgd.fp16.cuda --random-weights 1 \
    --input input=/tmp/tb-$v/resnet50_b64.x.npy --input labels=/tmp/tb-$v/resnet50_b64.y.npy \
    --steps 1 > $O/$v/convlog.txt 2>&1; echo "$v convlog rc=$? lines=$(wc -l < $O/$v/convlog.txt)"
done
(cd $O && tar czf $OUT/call6.tar.gz .)
