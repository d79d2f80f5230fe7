#!/usr/bin/env bash
# Sets up, builds, and runs the main job: the problem memopt exists for, training memory.
#   1. the bundled model (models/tiny_convnet.onnx) as a training step on scikit-learn's digits
#      (python/tools/digits_job.py: the data, and a batch-32 copy of the model);
#   2. memopt-compile plans it once without a limit, then compiles it under a byte budget of
#      60% of that arena: the remat solver recomputes what it must, the report says what, the
#      timeline (SVG) shows every buffer over the step;
#   3. trains 300 steps (SGD with momentum), saves the trained ONNX model, and onnxruntime
#      scores it on the held-out digits (fails below 90%).
# CUDA when a GPU and nvcc are present, else the host backend (and it says so).
# Usage: scripts/main.sh            the training job above
#        scripts/main.sh MODEL.onnx inference: compile MODEL, run it, compare with onnxruntime
# (env: MEMOPT_TARGET=host|cuda to force)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

MODEL=${1:-}
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

if [ -z "$MODEL" ]; then
  D=$OUT/digits
  mkdir -p "$D"
  echo "== the bundled model's training step on digits ($D)"
  $PYTHON python/tools/digits_job.py prepare "$D"
  TRAIN=(--train --loss cross-entropy --loss-output logits --optimizer sgd --lr 0.05
         --momentum 0.9 --bn-batch-stats)
  build/bin/memopt-compile "$D/digits_model.onnx" "${TRAIN[@]}" --emit plan -o "$D/free.mlir" \
    --report "$D/free.json" --quiet
  FREE=$($PYTHON -c "import json, sys; print(json.load(open(sys.argv[1]))['arena_bytes'])" \
    "$D/free.json")
  BUDGET=$((FREE * 6 / 10))
  echo "== memopt-compile --target $TARGET --memory-budget $BUDGET (60% of the ${FREE}-byte arena)"
  build/bin/memopt-compile "$D/digits_model.onnx" "${TRAIN[@]}" --memory-budget "$BUDGET" \
    -o "$D/train" --target "$TARGET" "${ARCH_FLAGS[@]}" --report "$D/train.memory.json" \
    --report-svg "$D/train.timeline.svg"
  echo "== training 300 steps of 32 digits"
  "$D/train" --input "input=$D/train_x.npy" --input "labels=$D/train_y.npy" --steps 300 \
    --log "$D/loss.csv" --save "$D/trained.onnx" | awk 'NR == 1 || NR % 50 == 0'
  $PYTHON python/tools/digits_job.py check "$D" "$D/trained.onnx"
  echo "== wrote $D/train (the training step), $D/trained.onnx, $D/loss.csv,"
  echo "   the memory report $D/train.memory.json and its timeline $D/train.timeline.svg"
  exit 0
fi

NAME=$(basename "$MODEL" .onnx)
echo "== memopt-compile $MODEL --target $TARGET"
build/bin/memopt-compile "$MODEL" -o "$OUT/$NAME" --target "$TARGET" "${ARCH_FLAGS[@]}" \
  --report "$OUT/$NAME.memory.json"

echo "== running $OUT/$NAME on a deterministic input"
$PYTHON python/tools/run_check.py --model "$MODEL" --exe "$OUT/$NAME" --work "$OUT/$NAME.run"
echo "== wrote $OUT/$NAME (executable), $OUT/$NAME.weights, $OUT/$NAME.memory.json"
