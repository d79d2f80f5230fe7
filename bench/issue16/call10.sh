#!/bin/bash
# Device call 10 of issue 16: ResNet-50's final same-call figures. Carry .dev-c9 (call 9's:
# fp16 and bf16 after the zero-bias drop) with .dev-c9/old/obj = call 7's fp16 program, linked
# on the device with the same runtime (unchanged since call 7): 1. the old fp16 program alone;
# 2. fp16, memopt then PyTorch AMP eager (channels-last) and torch.compile AMP; 3. the same in
# bf16. Everything lands in $OUT/call10.tar.gz.
set -u
O=/tmp/c10; mkdir -p $O $OUT
[ -d .dev-c9/old/rt ] || cp -r .dev-c9/rt .dev-c9/old/
timeout 100 python3 .dev-c9/train_bench.py device --carry .dev-c9/old --out $O/old.fp16 \
  --work /tmp/tb10old --precision fp16 --configs resnet50_b64 --optimizers sgd --checks \
  --skip-gpu-check --skip-torch --no-warm --runs 15 --deadline-s 90 > $O/old.fp16.txt 2>&1
grep -E "^memopt" $O/old.fp16/device_log.txt | cut -c1-120 | sed "s/^/old fp16: /"
for P in fp16 bf16; do
  timeout 240 python3 .dev-c9/train_bench.py device --carry .dev-c9 --out $O/$P \
    --work /tmp/tb10 --precision $P --configs resnet50_b64 --optimizers sgd --checks \
    --skip-gpu-check --tf32 default --modes eager compile --warm-cap-s 150 --runs 15 \
    --deadline-s 230 > $O/$P.txt 2>&1
  grep -E "^memopt|^torch" $O/$P/device_log.txt | cut -c1-150 | sed "s/^/$P: /"
done
(cd $O && tar czf $OUT/call10.tar.gz .)
