#!/bin/bash
# Between call 1 and call 2 (here, with the memopt build): fills the exported graphs' weights
# and compiles the programs call 2 runs into DEST (memopt-compile --emit source, CUDA sm_90):
# the GPT-2 and ViT-B/16 fp16 training steps (bench/train_bench.py's flags: SGD momentum, the
# exporter's constants frozen), Swin-T fp16 and tf32, BERT-base and the small Llama fp16.
# Usage: bash bench/data_movement/prepare.sh GRAPHS.tar.gz DEST   (e.g. DEST=.dev-dm/programs)
set -eu
cd "$(dirname "$0")/../.."
G=$(mktemp -d); F=$(mktemp -d); P=$(mktemp -d); DEST=$2; mkdir -p "$DEST"
tar xzf "$1" -C $G
B=build/bin/memopt-compile
for g in $G/*.onnx; do n=$(basename $g .onnx)
  python3 python/models/fill_weights.py $g $F/$n > /dev/null
done
TRAIN="--train --loss cross-entropy --loss-output logits --optimizer sgd --lr 0.001 --momentum 0.9
  --target cuda --arch sm_90 --emit source --precision fp16"
for n in gpt2_b8 vit_b_16_b32; do
  graph=$F/train_$n/train_$n.onnx; [ -f $graph ] || continue
  frozen=$(cd bench && python3 -c "from train_bench.prepare import frozen_constants; print(','.join(frozen_constants('$graph')))")
  $B $graph $TRAIN ${frozen:+--freeze $frozen} -o $P/train_${n}_fp16 > $P/train_$n.log
done
for n in swin_t_b32 bert_base_b8 llama_small_b8; do
  for p in fp16 tf32; do
    [ $n != swin_t_b32 ] && [ $p = tf32 ] && continue
    $B $F/$n/$n.onnx -o $P/${n}_$p --target cuda --emit source --arch sm_90 --precision $p \
      --layout auto > $P/${n}_$p.log
  done
done
cp $P/*.cu "$DEST"/; ls -la "$DEST"; rm -rf $G $F $P
