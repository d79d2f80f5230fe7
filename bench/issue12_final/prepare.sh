#!/bin/bash
# Issue 12's last re-measure, here: fills the weights of the inference graphs that
# bench/data_movement/call1.sh exported (gpu_bench_precision.py export-one: Swin-T b32, GPT-2,
# BERT-base and the small Llama at 8 x 512) and compiles each in fp16 and tf32 (--layout auto,
# CUDA sm_90, --emit source) into DEST for bench/issue12_final/call.sh.
# Usage: bash bench/issue12_final/prepare.sh GRAPHS_DIR DEST
set -eu
cd "$(dirname "$0")/../.."
F=$(mktemp -d); mkdir -p "$2"; DEST=$(realpath "$2")
B=build/bin/memopt-compile
for n in swin_t_b32 gpt2_b8 bert_base_b8 llama_small_b8; do
  python3 python/models/fill_weights.py "$1/$n.onnx" $F/$n > /dev/null
  for p in fp16 tf32; do
    $B $F/$n/$n.onnx -o $DEST/${n}_$p --target cuda --emit source --arch sm_90 --precision $p \
      --layout auto --report $DEST/${n}_$p.json --quiet
  done
done
rm -f $DEST/*.weights $DEST/*.build.sh $DEST/*.onnx-template
ls -la $DEST; rm -rf $F
