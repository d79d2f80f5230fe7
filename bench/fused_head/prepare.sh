#!/bin/bash
# The fused language-model head and C = 3 rematerialization on the GPU: programs for
# bench/fused_head/run.sh, compiled here (they need memopt-compile; the device has no MLIR).
#   GRAPHS.tar.gz: bench/data_movement/call1.sh's export (train_gpt2_b8.onnx).
#   DEST: a carry folder (e.g. .dev-head), *.cu written there.
# Programs (GPT-2 8 x 512, SGD momentum, bench/train_bench.py's flags):
#   head_{on,off}_fp16, head_{on,off}_tf32   --fuse-head on / off
#   remat25_c3_tf32, remat50_c3_tf32          --fuse-head on, --memory-budget at 25% / 50% of
#                                             the fused activation arena (train_bench's
#                                             remat_budget), --remat-max-computations 3
#   tiny_{on,off}_{fp32,fp16}(.cu, .host.cpp) a tied-embedding LM of python/tests/
#                                             test_training.py (make_tied_lm), CUDA and host,
#                                             for a first-step comparison on the device
# Usage: bash bench/fused_head/prepare.sh GRAPHS.tar.gz DEST
set -eu
cd "$(dirname "$0")/../.."
G=$(mktemp -d); F=$(mktemp -d); mkdir -p "$2"; DEST=$(realpath "$2")
tar xzf "$1" -C $G
B=build/bin/memopt-compile
graph=$G/train_gpt2_b8.onnx; [ -f $graph ] || graph=$G/gpt2_b8.onnx
python3 python/models/fill_weights.py $graph $F/g > /dev/null
filled=$F/g/$(basename $graph)
frozen=$(cd bench && python3 -c "from train_bench.prepare import frozen_constants; print(','.join(frozen_constants('$graph')))")
TRAIN=(--train --loss cross-entropy --loss-output logits --optimizer sgd --lr 0.001 --momentum 0.9
       --target cuda --arch sm_90 --emit source ${frozen:+--freeze $frozen})
for p in fp16 tf32; do
  for h in on off; do
    $B $filled "${TRAIN[@]}" --precision $p --fuse-head $h -o $DEST/head_${h}_$p \
      --report $DEST/head_${h}_$p.json --quiet
  done
done
for f in 0.25 0.5; do
  budget=$(cd bench && python3 -c "
import json; from train_bench.configs import remat_budget
print(remat_budget(json.load(open('$DEST/head_on_tf32.json')), $f)['budget_bytes'])")
  n=remat$(python3 -c "print(int($f * 100))")_c3_tf32
  $B $filled "${TRAIN[@]}" --precision tf32 --fuse-head on --memory-budget $budget \
    --remat-max-computations 3 -o $DEST/$n --report $DEST/$n.json --quiet
done
python3 -c "
import sys; sys.path[:0] = ['python/tests', 'python/models']
import test_training; test_training.make_tied_lm('$F/tiny.onnx', batch=4, seq=32)"
for p in fp32 fp16; do
  for h in on off; do
    for t in cuda host; do
      $B $F/tiny.onnx --train --momentum 0.9 --lr 0.5 --precision $p --fuse-head $h \
        --target $t --emit source -o $DEST/tiny_${h}_${p}_$t --quiet
    done
  done
done
rm -f $DEST/*.weights $DEST/*.build.sh $DEST/*.onnx-template
ls -la $DEST; rm -rf $G $F
