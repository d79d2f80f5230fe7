#!/usr/bin/env bash
# Sets up, builds, and runs every test: lit + FileCheck and C++ unit tests
# (through ctest), then the Python end-to-end suite (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== ctest (lit regression suite and C++ unit tests)"
ctest --test-dir build --output-on-failure -j "$(nproc)"

echo "== pytest (end-to-end numerics and import coverage)"
PYTHON=${PYTHON:-python3}
MEMOPT_BUILD_DIR="$PWD/build" $PYTHON -m pytest -q -n auto python/tests
