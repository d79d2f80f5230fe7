#!/usr/bin/env bash
# Sets up, builds, and runs the tests: lit + FileCheck and C++ unit tests
# (through ctest), then the Python end-to-end suite (pytest).
#
#   bash scripts/test.sh          the fast tier (CI): every pass, op, backend path and
#                                 a few members of each model-zoo sweep
#   bash scripts/test.sh --all    every test, every zoo model included (nightly)
#
# docs/testing.md says what each tier holds.
set -euo pipefail
cd "$(dirname "$0")/.."
TIER=fast
case "${1:-}" in
  "") ;;
  --all) TIER=all ;;
  *) echo "usage: scripts/test.sh [--all]" >&2; exit 2 ;;
esac
bash scripts/setup.sh

echo "== ctest (lit regression suite and C++ unit tests)"
ctest --test-dir build --output-on-failure -j "$(nproc)"

echo "== pytest, $TIER tier (end-to-end numerics and import coverage)"
PYTHON=${PYTHON:-python3}
MEMOPT_TEST_TIER=$TIER MEMOPT_BUILD_DIR="$PWD/build" $PYTHON -m pytest -q -n auto --durations=30 python/tests
