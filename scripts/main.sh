#!/usr/bin/env bash
# Sets up, builds, and runs the main job on the bundled model:
#   1. memopt-compile: import, schedule, in-place reuse, plan the arena, print
#      the memory report, lower and build an executable (CUDA when a GPU and
#      nvcc are present, else the host backend, and it says so);
#   2. runs the executable on a deterministic input and checks its output
#      against onnxruntime.
# Usage: scripts/main.sh [MODEL.onnx]   (env: MEMOPT_TARGET=host|cuda to force)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

MODEL=${1:-models/tiny_convnet.onnx}
OUT=out
mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}

TARGET=${MEMOPT_TARGET:-}
ARCH_FLAGS=()
if [ -z "$TARGET" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
      [ -f build/lib/Runtime/libmemopt_runtime_cuda.a ]; then
    TARGET=cuda
  else
    TARGET=host
    echo "== no CUDA GPU here (nvidia-smi finds none): compiling for the host backend;" \
      "the same program runs on the GPU with --target cuda"
  fi
fi
if [ "$TARGET" = cuda ]; then
  CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d . || true)
  ARCH_FLAGS=(--arch "sm_${CC:-90}")
fi

NAME=$(basename "$MODEL" .onnx)
echo "== memopt-compile $MODEL --target $TARGET"
build/bin/memopt-compile "$MODEL" -o "$OUT/$NAME" --target "$TARGET" "${ARCH_FLAGS[@]}" \
  --report "$OUT/$NAME.memory.json"

echo "== running $OUT/$NAME on a deterministic input"
$PYTHON python/tools/run_check.py --model "$MODEL" --exe "$OUT/$NAME" --work "$OUT/$NAME.run"
echo "== wrote $OUT/$NAME (executable), $OUT/$NAME.weights, $OUT/$NAME.memory.json"
