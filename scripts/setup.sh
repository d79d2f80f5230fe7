#!/usr/bin/env bash
# Installs every dependency memopt needs on a bare Debian 12 machine and builds
# it into ./build. Safe to run again: installed packages and an up-to-date build
# are skipped quickly.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  # LLVM/MLIR 22: the compiler infrastructure, lit and FileCheck.
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # ONNX's C++ library (protobuf model parsing, text-format parser).
  libonnx-dev libprotobuf-dev protobuf-compiler
  # COIN-OR CBC: the MILP solver behind memopt-remat's exact method.
  coinor-libcbc-dev
  # Build tools and the C++ unit-test framework.
  cmake ninja-build g++ libgtest-dev python3 python3-pip
  # Python's headers: the Python package's extension modules (python/).
  python3-dev
  # A separate environment for the gradient oracle (onnxruntime-training).
  python3-venv
  # The sanitizer and fuzzing build (scripts/sanitize.sh): clang and libFuzzer.
  clang-22 libclang-rt-22-dev
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "== installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if ! $PYTHON -c "import onnx, onnxruntime, numpy, pytest, xdist, sklearn, nanobind, scikit_build_core" \
    2>/dev/null; then
  echo "== installing Python packages (python/requirements.txt)"
  $PYTHON -m pip install -q -r python/requirements.txt ||
    $PYTHON -m pip install -q --break-system-packages -r python/requirements.txt
fi

# cudnn-frontend: the header-only C++ graph API over cuDNN that the CUDA
# backend's fused attention is written against (lib/Runtime/Cuda/
# CudnnAttention.cpp); only the wheel's include/ folder is used, which
# lib/Runtime/CMakeLists.txt finds through this Python. Pinned: 1.19 and later
# also need NVRTC at link time.
CUDNN_FRONTEND_VERSION=1.18.0
if ! $PYTHON -c "import importlib.metadata as m, sys; sys.exit(m.version('nvidia-cudnn-frontend') != '$CUDNN_FRONTEND_VERSION')" \
    2>/dev/null; then
  echo "== installing nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION (headers for the CUDA backend)"
  $PYTHON -m pip install -q --no-deps "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION" ||
    $PYTHON -m pip install -q --no-deps --break-system-packages \
      "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION"
fi

# The gradient oracle: onnxruntime-training-cpu ships its own `onnxruntime`
# module, so it lives in an environment of its own (python/tools/
# ort_training_oracle.py runs there; tests find it at this path).
ORT_TRAINING_VENV=build/ort-training-venv
if ! "$ORT_TRAINING_VENV/bin/python" -c \
    "import onnx, numpy, onnxruntime.capi._pybind_state" 2>/dev/null; then
  echo "== installing onnxruntime-training-cpu into $ORT_TRAINING_VENV"
  mkdir -p build
  $PYTHON -m venv "$ORT_TRAINING_VENV"
  "$ORT_TRAINING_VENV/bin/pip" install -q onnxruntime-training-cpu==1.19.2 \
    onnx numpy
fi

echo "== configuring and building memopt in ./build"
if [ ! -f build/build.ninja ]; then
  # The Python package's modules are built with this Python (its nanobind).
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
    -DPython_EXECUTABLE="$($PYTHON -c 'import sys; print(sys.executable)')" >/dev/null
fi
cmake --build build -j "$(nproc)"
