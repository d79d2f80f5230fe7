#!/usr/bin/env bash
# The sanitizer and fuzzing run (docs/robustness.md): configures ./build-san with clang 22,
# AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer's coverage (every memopt object and
# every program memopt-compile builds; Debian's libMLIR/libLLVM/libonnx are not instrumented),
# builds everything, then runs ctest (lit, unit tests, the fuzz regression inputs), a slice of
# pytest, and each fuzz target for MEMOPT_FUZZ_SECONDS (default 12). Any sanitizer report, test
# failure or fuzzer crash fails the script. CI (.ci/run) runs it after scripts/test.sh.
# Warnings are errors in the gcc build (scripts/test.sh), not here: clang 22 with libstdc++ 12
# warns about deprecated declarations inside the standard library.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
BUILD=${MEMOPT_SANITIZE_BUILD:-build-san}
FUZZ_SECONDS=${MEMOPT_FUZZ_SECONDS:-12}
JOBS=${MEMOPT_JOBS:-$(nproc)}

echo "== configuring and building memopt with ASan + UBSan + libFuzzer in ./$BUILD"
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DMEMOPT_SANITIZE=address,undefined -DMEMOPT_FUZZ=ON \
    -DMEMOPT_WERROR=OFF >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS"

# Leaks are not checked: MLIR and protobuf keep process-lifetime singletons.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

echo "== ctest under the sanitizers (lit, unit tests, fuzz regression inputs)"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"

echo "== pytest slice under the sanitizers"
MEMOPT_BUILD_DIR="$PWD/$BUILD" ${PYTHON:-python3} -m pytest -q -n "$JOBS" \
  python/tests/test_robustness.py python/tests/test_e2e_host.py \
  -k "robustness or generated_model or bundled_model"

echo "== fuzzing each target for ${FUZZ_SECONDS}s"
for target in onnx-import mlir-passes planner-csv runtime-files; do
  MEMOPT_FUZZ_BUILD=$BUILD bash fuzz/run.sh "$target" "$FUZZ_SECONDS"
done
