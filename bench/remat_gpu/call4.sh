#!/bin/bash
# Fourth device call (carry .dev-c4 = call 3's carry plus `prepare --precision tf32
# --budget-fractions 0.5 0.25 --remat-max-computations 3 --remat-only --remat-kernel-times
# call3/tf32`: the budgeted programs priced by call 3's measured forward times):
# issue 17's table: memopt unconstrained / 50% / 25%, PyTorch eager, torch.utils.checkpoint
# per block, torch.compile, and torch.compile with activation_memory_budget 0.5 and 0.25
# (TF32 as PyTorch's defaults). Everything lands in $OUT/call4.tar.gz.
# Usage: bash bench/remat_gpu/call4.sh
set -u
O=/tmp/c4; mkdir -p $O/tf32 $OUT
timeout 570 python3 .dev-c4/train_bench.py device --carry .dev-c4 --out $O/tf32 --precision tf32 \
  --budget-fractions 0.5 0.25 --optimizers sgd --checks --skip-gpu-check --tf32 default \
  --modes eager checkpoint compile compile-budget --activation-budgets 0.5 0.25 \
  --warm-cap-s 300 --runs 15 --deadline-s 550 > $O/tf32.txt 2>&1
echo "tf32 rc=$?"; grep -E "^memopt|^torch" $O/tf32/device_log.txt | cut -c1-160
(cd $O && tar czf $OUT/call4.tar.gz .)
