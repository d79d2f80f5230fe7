#!/bin/bash
# Device call 9 of issue 16 (carry .dev-c9 = `prepare --precision fp16` and `--precision bf16`
# of ResNet-50 alone, after the zero-bias drop): how much memopt's step moves from process to
# process (cuDNN's algorithm search runs at each start): the fp16 program four times, the bf16
# one twice, each a separate `device --skip-torch` (18 steps, --bench 15), nothing else on the
# GPU. Everything lands in $OUT/call9.tar.gz.
set -u
O=/tmp/c9; mkdir -p $O $OUT
for run in 1 2 3 4 5 6; do
  P=fp16; [ $run -gt 4 ] && P=bf16
  timeout 100 python3 .dev-c9/train_bench.py device --carry .dev-c9 --out $O/$P.run$run \
    --work /tmp/tb9 --precision $P --configs resnet50_b64 --optimizers sgd --checks \
    --skip-gpu-check --skip-torch --no-warm --runs 15 --deadline-s 90 > $O/$P.run$run.txt 2>&1
  grep -E "^memopt" $O/$P.run$run/device_log.txt | cut -c1-120 | sed "s/^/$P run $run: /"
done
(cd $O && tar czf $OUT/call9.tar.gz .)
