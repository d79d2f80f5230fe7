#!/usr/bin/env bash
# One-rank NCCL data-parallel training on one GPU against the host backend
# (docs/data-parallel.md, "Runtime"). Two halves:
#
#   prepare (here, with MLIR and memopt-compile built in ./build):
#     bash scripts/gpu_nccl_check.sh prepare /work/main/.dev-nccl
#   builds small models (python/tests/test_data_parallel.py's MLP and conv
#   net), compiles each case for --target host (run here: the reference
#   losses and --save-state) and for --target cuda --emit source (the .cu,
#   .weights), all into the folder; about 1 MiB.
#
#   run (the GPU machine: nvcc, PyTorch's wheels with cuDNN and NCCL, no MLIR):
#     run(command="bash scripts/gpu_nccl_check.sh run .dev-nccl $OUT",
#         carry=[".dev-nccl"], timeout_s=600)
#   builds the runtime standalone with nvcc (cmake -S lib/Runtime), then:
#     1. memopt-nccl-check-cuda: the CUDA collectives over real NCCL on one
#        rank, reduce-scatter and all-gather included, and the host
#        micro-step gate of accumulation;
#     2. every case's CUDA executable, trained 4 steps as one NCCL rank, once
#        with no launch variables and once torchrun-style (RANK=0
#        WORLD_SIZE=1 LOCAL_RANK=0): losses within 1e-4 relative of the host
#        backend's, weights and optimizer state within 1e-4 relative L2;
#     3. errors: a missing NCCL library (MEMOPT_NCCL_LIBRARY=/nonexistent)
#        and WORLD_SIZE=2 for a one-rank program each give one message and a
#        non-zero exit.
#   Prints "GPU NCCL CHECK PASSED" or "GPU NCCL CHECK FAILED"; logs under the
#   second argument ($OUT) when given.
#
# Cases: --data-parallel 1 with --shard none, with and without --accumulate 2
# (all-reduce; the accumulation gate decided on the host), SGD and AdamW.
# `--data-parallel 1 --shard optimizer|gradients` compiles as shard none (one
# rank owns every element), so the reduce-scatter / all-gather calls are
# checked by memopt-nccl-check-cuda.
# Multi-GPU (WORLD_SIZE > 1) needs a machine with several GPUs (the ranks meet over TCP at
# MASTER_ADDR; bench/data_parallel_bench.py runs every model and mode on two):
#   torchrun --nproc-per-node 2 --no-python \
#       ./step --input x=X.npy --input labels=Y.npy --steps 10
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-}
DIR=${2:-}
if [ -z "$MODE" ] || [ -z "$DIR" ]; then
  echo "usage: $0 prepare|run DIR [LOGDIR]" >&2
  exit 2
fi
STEPS=4
# name | model | compile flags
CASES=(
  "mlp_sgd_none|mlp|--optimizer sgd --lr 0.1 --momentum 0.9 --weight-decay 0.01 --data-parallel 1 --shard none"
  "mlp_adamw_none|mlp|--optimizer adamw --lr 0.01 --weight-decay 0.05 --data-parallel 1"
  "mlp_adamw_acc2|mlp|--optimizer adamw --lr 0.01 --weight-decay 0.05 --data-parallel 1 --accumulate 2"
  "conv_sgd_acc2|conv|--optimizer sgd --lr 0.1 --momentum 0.9 --data-parallel 1 --accumulate 2"
)

if [ "$MODE" = prepare ]; then
  COMPILE=${MEMOPT_COMPILE:-$PWD/build/bin/memopt-compile}
  [ -x "$COMPILE" ] || { echo "error: $COMPILE not built" >&2; exit 1; }
  rm -rf "$DIR" && mkdir -p "$DIR/host" "$DIR/cuda" "$DIR/ref" || exit 1
  python3 - "$DIR" <<'PY' || exit 1
import pathlib, sys
import numpy as np
sys.path.insert(0, "python/tests")
from test_data_parallel import make_convnet, make_mlp
d = pathlib.Path(sys.argv[1])
make_mlp(d / "mlp.onnx", batch=4)
make_convnet(d / "conv.onnx", batch=2)
rng = np.random.default_rng(5)
np.save(d / "mlp_x.npy", rng.standard_normal((16, 8)).astype(np.float32))
np.save(d / "conv_x.npy", rng.standard_normal((16, 2, 4, 4)).astype(np.float32))
np.save(d / "labels.npy", rng.integers(0, 3, size=16).astype(np.int64))
PY
  for entry in "${CASES[@]}"; do
    IFS='|' read -r name model flags <<<"$entry"
    # shellcheck disable=SC2086
    "$COMPILE" "$DIR/$model.onnx" --train $flags --quiet -o "$DIR/host/$name" || exit 1
    # shellcheck disable=SC2086
    "$COMPILE" "$DIR/$model.onnx" --train $flags --quiet --target cuda \
      --emit source -o "$DIR/cuda/$name" || exit 1
    "$DIR/host/$name" --steps $STEPS --input "x=$DIR/${model}_x.npy" \
      --input "labels=$DIR/labels.npy" --log "$DIR/ref/$name.csv" \
      --save-state "$DIR/ref/$name" >/dev/null || exit 1
    echo "prepared $name"
  done
  rm -rf "$DIR/host"  # the reference is in ref/; host executables stay here
  du -sh "$DIR"
  exit 0
fi

[ "$MODE" = run ] || { echo "error: mode '$MODE' is not prepare or run" >&2; exit 2; }
LOG=${3:-$DIR/logs}
mkdir -p "$LOG"
BUILD=${BUILD:-/tmp/memopt-runtime-nccl}
WORK=$BUILD/work
mkdir -p "$WORK"
status=0
nvidia-smi -L || echo "warning: nvidia-smi failed"

# cuDNN and NCCL from PyTorch's wheels (gpu_check.sh does the same for cuDNN).
EXTRA=()
LINK=()
CUDNN_DIR=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null || true)
if [ -n "$CUDNN_DIR" ] && [ -f "$CUDNN_DIR/include/cudnn.h" ]; then
  mkdir -p "$BUILD/cudnn-lib"
  ln -sf "$(ls "$CUDNN_DIR"/lib/libcudnn.so* | head -1)" "$BUILD/cudnn-lib/libcudnn.so"
  EXTRA+=(-DMEMOPT_CUDNN_INCLUDE="$CUDNN_DIR/include"
          -DMEMOPT_CUDNN_LIBRARY="$BUILD/cudnn-lib/libcudnn.so")
  LINK+=(-L"$BUILD/cudnn-lib")
  export LD_LIBRARY_PATH="$CUDNN_DIR/lib:${LD_LIBRARY_PATH:-}"
fi
if [ -z "${MEMOPT_NCCL_LIBRARY:-}" ]; then
  NCCL_DIR=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
  [ -n "$NCCL_DIR" ] && [ -f "$NCCL_DIR/lib/libnccl.so.2" ] &&
    export MEMOPT_NCCL_LIBRARY="$NCCL_DIR/lib/libnccl.so.2"
fi
echo "NCCL: ${MEMOPT_NCCL_LIBRARY:-libnccl.so.2 from LD_LIBRARY_PATH}"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
ARCH=${CUDA_ARCH:-90}

echo "== build the runtime ($BUILD)"
start=$(date +%s)
cmake -S lib/Runtime -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DMEMOPT_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" "${EXTRA[@]}" \
  >"$LOG/configure.txt" 2>&1 || { tail -20 "$LOG/configure.txt"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" --target memopt_runtime_main \
  memopt_runtime_cuda memopt-nccl-check-cuda >"$LOG/build.txt" 2>&1 ||
  { tail -40 "$LOG/build.txt"; exit 1; }
RT="$BUILD"
pids=()
for entry in "${CASES[@]}"; do
  IFS='|' read -r name model flags <<<"$entry"
  nvcc -std=c++17 -O1 -arch=sm_$ARCH "$DIR/cuda/$name.cu" -Iinclude -o "$WORK/$name" \
    "$RT/libmemopt_runtime_main.a" "$RT/libmemopt_runtime_driver.a" \
    "$RT/libmemopt_runtime_cuda.a" "$RT/libmemopt_runtime_common.a" "${LINK[@]}" \
    -lcublasLt -lcudnn >"$LOG/nvcc_$name.txt" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
[ $status -eq 0 ] || { tail -n 30 "$LOG"/nvcc_*.txt; echo "GPU NCCL CHECK FAILED"; exit 1; }
echo "build took $(( $(date +%s) - start )) s"

echo "== 1. the CUDA collectives over NCCL, one rank"
env -u RANK -u WORLD_SIZE -u LOCAL_RANK "$BUILD/memopt-nccl-check-cuda" 2>&1 |
  tee "$LOG/nccl_check.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== 2. one NCCL rank against the host backend"
for entry in "${CASES[@]}"; do
  IFS='|' read -r name model flags <<<"$entry"
  for launch in plain torchrun; do
    out="$WORK/${name}_$launch"
    rm -rf "$out" && mkdir -p "$out"
    if [ $launch = plain ]; then
      envs=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK)
    else
      envs=(env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0)
    fi
    "${envs[@]}" "$WORK/$name" --weights "$DIR/cuda/$name.weights" --steps $STEPS \
      --input "x=$DIR/${model}_x.npy" --input "labels=$DIR/labels.npy" \
      --log "$out/log.csv" --save-state "$out/state" >"$LOG/${name}_$launch.txt" 2>&1 ||
      { echo "FAIL $name ($launch): exit $?"; tail -5 "$LOG/${name}_$launch.txt"; status=1; continue; }
    grep -q "ranks (processes over NCCL; this is rank 0)" "$LOG/${name}_$launch.txt" ||
      { echo "FAIL $name ($launch): not an NCCL rank"; status=1; }
    python3 - "$DIR/ref/$name" "$out" "$name ($launch)" <<'PY' || status=1
import csv, glob, os, sys
import numpy as np
ref, out, label = sys.argv[1:]
def losses(path):
    with open(path) as f:
        return np.array([float(r["loss"]) for r in csv.DictReader(f)])
a, b = losses(out + "/log.csv"), losses(ref + ".csv")
loss_err = float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-12)))
worst, state_err = "", 0.0
for path in sorted(glob.glob(ref + "/*.npy")):
    name = os.path.basename(path)
    e, g = np.load(path).astype(np.float64), np.load(os.path.join(out, "state", name))
    err = float(np.linalg.norm(g - e) / max(np.linalg.norm(e), 1e-30))
    if err >= state_err:
        worst, state_err = name, err
ok = a.shape == b.shape and loss_err <= 1e-4 and state_err <= 1e-4
print(f"{'ok  ' if ok else 'FAIL'} {label}: losses {a.round(6).tolist()} "
      f"max rel err {loss_err:.2e}; state worst {worst} rel L2 {state_err:.2e}")
sys.exit(0 if ok else 1)
PY
  done
done

echo "== 3. errors"
first="${CASES[0]%%|*}"
expect_error() {  # label, expected text, command...
  local label=$1 text=$2
  shift 2
  local output
  output=$("$@" 2>&1)
  local code=$?
  if [ $code -ne 0 ] && grep -qF -- "$text" <<<"$output"; then
    echo "ok   $label: exit $code: $(grep -F "$text" <<<"$output" | head -1)"
  else
    echo "FAIL $label: exit $code: $output"
    status=1
  fi
}
args=(--weights "$DIR/cuda/$first.weights" --steps 1 --input "x=$DIR/mlp_x.npy"
      --input "labels=$DIR/labels.npy")
expect_error "missing NCCL" "cannot load NCCL: dlopen(\"/nonexistent/libnccl.so.2\")" \
  env -u RANK -u WORLD_SIZE MEMOPT_NCCL_LIBRARY=/nonexistent/libnccl.so.2 "$WORK/$first" "${args[@]}"
expect_error "WORLD_SIZE=2" "compiled for 1 data-parallel ranks; WORLD_SIZE is 2" \
  env RANK=0 WORLD_SIZE=2 MEMOPT_NCCL_ID_FILE="$WORK/id.$$" "$WORK/$first" "${args[@]}"
expect_error "--ranks 2" "--ranks 2: WORLD_SIZE is 1" \
  env -u RANK -u WORLD_SIZE "$WORK/$first" "${args[@]}" --ranks 2

[ $status -eq 0 ] && echo "GPU NCCL CHECK PASSED" || echo "GPU NCCL CHECK FAILED"
exit $status
