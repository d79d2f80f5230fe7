#!/bin/bash
# First device call of the fused-head / C = 3 measurement (run from the repository root on the
# GPU machine, carry .dev-head from bench/fused_head/prepare.sh):
#   - exports train_bench's graphs (the three bench models and the gradient-check ones) in the
#     background into $OUT/train_graphs.tar.gz (for `train_bench.py prepare` here);
#   - bench/fused_head/run.sh: kernel suite CUDA vs host, GPT-2's step with the head fused and
#     separate, under 25% / 50% budgets at C = 3, the tied LM on CUDA against the host;
#   - ViT-B/16 b32 with AMP fp16 in PyTorch eager and torch.compile (issue 16's open target),
#     after the memopt runs, alone on the GPU.
# Usage: CARRY=.dev-head bash bench/remat_gpu/call1.sh
set -u
mkdir -p $OUT /tmp/exp
( cd bench && python3 train_bench.py export --out /tmp/exp > /tmp/exp/log.txt 2>&1
  cd /tmp/exp && tar czf $OUT/train_graphs.tar.gz *.onnx export_log.txt ) &
EXPORT=$!
bash bench/fused_head/run.sh 2>&1 | tee $OUT/run.txt
wait $EXPORT; tail -8 /tmp/exp/export_log.txt
(cd bench && timeout 300 python3 train_bench.py torch-one vit_b_16_b32 --out $OUT/torch_vit_amp.json \
   --precision fp16 --modes eager compile --optimizers sgd --tf32 default --runs 20 > $OUT/torch_vit.txt 2>&1)
echo "torch-one rc=$?"; tail -5 $OUT/torch_vit.txt
python3 -c "
import json; d = json.load(open('$OUT/torch_vit_amp.json'))
for k, v in d['runs'].items(): print(k, {a: b for a, b in v.items() if 'ms' in a or 'bytes' in a})"
