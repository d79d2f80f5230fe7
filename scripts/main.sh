#!/usr/bin/env bash
# Sets up, builds, and runs the main job on the bundled model: import it,
# schedule, decide in-place reuse, plan the arena and print the memory report
# (JSON, SVG timeline and HTML page land in out/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

MODEL=${1:-models/tiny_convnet.onnx}
mkdir -p out
echo "== memopt on $MODEL"
build/bin/memopt-translate --import-onnx "$MODEL" |
  build/bin/memopt-opt --memopt-summary --canonicalize \
    --memopt-schedule=report --memopt-bufferize=report \
    --memopt-plan-memory="print=true report=out/memory.json svg=out/memory.svg html=out/memory.html" \
    -o out/planned.mlir
echo "== wrote out/planned.mlir, out/memory.json, out/memory.svg, out/memory.html"
