#!/usr/bin/env bash
# Builds the memopt runtime standalone with nvcc (no MLIR needed) on a machine
# with a CUDA GPU, then:
#   1. runs every CUDA kernel family and compares it with the host backend
#      (memopt-kernel-suite-cuda --out, memopt-kernel-suite-host --compare);
#   2. runs the example program on both backends through the executable main
#      and compares the outputs;
#   3. streams a weight file of WEIGHT_STREAM_BYTES (4 GiB) to the GPU and
#      back through the C API, checking the device-side random fill and
#      printing the load times (memopt-weight-stream-check-cuda);
#   4. prints kernel timings (memopt-kernel-suite-cuda --perf).
# Usage: scripts/gpu_check.sh [build-dir]
#   env: JOBS, CUDA_ARCH, SKIP_PERF, SKIP_EXAMPLE, PERF_FILTER (substring of the
#   timing names, e.g. attention)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-/tmp/memopt-runtime-gpu}
JOBS=${JOBS:-$(nproc)}
status=0

nvidia-smi -L || echo "warning: nvidia-smi failed"

# cuDNN: system headers first, else the pip wheel that PyTorch ships.
EXTRA=()
if ! ls /usr/include/cudnn.h /usr/local/include/cudnn.h \
        /usr/local/cuda/include/cudnn.h >/dev/null 2>&1; then
  CUDNN_DIR=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null || true)
  if [ -n "$CUDNN_DIR" ] && [ -f "$CUDNN_DIR/include/cudnn.h" ]; then
    mkdir -p "$BUILD/cudnn-lib"
    ln -sf "$(ls "$CUDNN_DIR"/lib/libcudnn.so* | head -1)" "$BUILD/cudnn-lib/libcudnn.so"
    EXTRA+=(-DMEMOPT_CUDNN_INCLUDE="$CUDNN_DIR/include"
            -DMEMOPT_CUDNN_LIBRARY="$BUILD/cudnn-lib/libcudnn.so")
    export LD_LIBRARY_PATH="$CUDNN_DIR/lib:${LD_LIBRARY_PATH:-}"
  fi
fi
[ -n "${CUDA_ARCH:-}" ] && EXTRA+=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH")
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)

echo "== configure and build ($BUILD, -j$JOBS)"
cmake -S lib/Runtime -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DMEMOPT_ENABLE_CUDA=ON "${EXTRA[@]}" || exit 1
start=$(date +%s)
TARGETS=()
[ -n "${SKIP_EXAMPLE:-}" ] && TARGETS=(--target memopt-kernel-suite-cuda memopt-kernel-suite-host)
cmake --build "$BUILD" -j "$JOBS" "${TARGETS[@]}" || exit 1
echo "build took $(( $(date +%s) - start )) s"

echo "== kernel suite: CUDA vs host"
rm -rf "$BUILD/suite" && mkdir -p "$BUILD/suite"
"$BUILD/memopt-kernel-suite-cuda" --out "$BUILD/suite" || status=1
"$BUILD/memopt-kernel-suite-host" --compare "$BUILD/suite" | tee "$BUILD/compare.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

if [ -z "${SKIP_EXAMPLE:-}" ]; then
echo "== example program through the executable main"
rm -rf "$BUILD/example" && mkdir -p "$BUILD/example/host" "$BUILD/example/cuda"
IMAGE=test/GPU/Inputs/image.npy
"$BUILD/memopt-example-model-host" --input image=$IMAGE --random-weights 7 \
  --output-dir "$BUILD/example/host" || status=1
"$BUILD/memopt-example-model-cuda" --input image=$IMAGE --random-weights 7 \
  --output-dir "$BUILD/example/cuda" --bench 50 || status=1
python3 - "$BUILD/example" <<'PY' || status=1
import sys, numpy as np
d = sys.argv[1]
a, b = np.load(d + "/host/probs.npy"), np.load(d + "/cuda/probs.npy")
err = float(np.max(np.abs(a - b)))
print("example probs max abs diff host vs cuda:", err)
sys.exit(0 if np.allclose(a, b, rtol=1e-4, atol=1e-6) else 1)
PY
echo "== weight files streamed to the GPU"
"$BUILD/memopt-weight-stream-check-cuda" --bytes "${WEIGHT_STREAM_BYTES:-4294967296}" \
  --old --dir "$BUILD" || status=1
fi

if [ -z "${SKIP_PERF:-}" ]; then
  echo "== kernel timings"
  "$BUILD/memopt-kernel-suite-cuda" --perf "${PERF_FILTER:-}" || status=1
fi

[ $status -eq 0 ] && echo "GPU CHECK PASSED" || echo "GPU CHECK FAILED"
exit $status
