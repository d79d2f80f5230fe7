#!/usr/bin/env bash
# Sets up, builds, and runs the main job on the bundled model: import it and
# print the memory summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

MODEL=${1:-models/tiny_convnet.onnx}
echo "== memopt on $MODEL"
build/bin/memopt-translate --import-onnx "$MODEL" |
  build/bin/memopt-opt --memopt-summary -o /dev/null
