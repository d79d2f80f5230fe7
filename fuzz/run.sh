#!/usr/bin/env bash
# Runs one fuzz target for SECONDS: fuzz/run.sh TARGET SECONDS [libFuzzer flags...]
#
# TARGET: onnx-import | mlir-passes | planner-csv | runtime-files (or fuzz-<name>).
# The build is $MEMOPT_FUZZ_BUILD (default ./build-san, made by scripts/sanitize.sh). The corpus
# grows in <build>/fuzz-corpus/<target> (seeded from fuzz/make_seeds.py), crashing inputs land in
# <build>/fuzz-artifacts/<target>/ and the exit status is libFuzzer's (non-zero on a crash, a
# timeout or a leak). Move a crash into fuzz/regressions/fuzz-<target>/ once it is fixed: ctest
# replays that folder. Figures (executions, coverage, corpus) go to <build>/fuzz-runs.log.
# Several processes: MEMOPT_FUZZ_JOBS=N (libFuzzer's -fork).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
target=${1#fuzz-}
target=fuzz-$target
seconds=$2
shift 2
build=${MEMOPT_FUZZ_BUILD:-build-san}
binary=$build/bin/$target
if [ ! -x "$binary" ]; then
  echo "fuzz/run.sh: $binary is missing: run scripts/sanitize.sh (or ninja -C $build $target)" >&2
  exit 2
fi
case $target in
  fuzz-onnx-import) max_len=32768 ;;
  fuzz-mlir-passes) max_len=32768 ;;
  *) max_len=4096 ;;
esac
seeds=$build/fuzz-seeds
if [ ! -d "$seeds/$target" ]; then
  python3 fuzz/make_seeds.py "$seeds" --translate "$build/bin/memopt-translate"
fi
corpus=$build/fuzz-corpus/$target
artifacts=$build/fuzz-artifacts/$target
mkdir -p "$corpus" "$artifacts"
regressions=()
[ -d "fuzz/regressions/$target" ] && regressions=("fuzz/regressions/$target")
fork=()
[ -n "${MEMOPT_FUZZ_JOBS:-}" ] && fork=(-fork="$MEMOPT_FUZZ_JOBS" -ignore_crashes=0)
log=$build/fuzz-logs/$target.$(date +%Y%m%d-%H%M%S).log
mkdir -p "$(dirname "$log")"
# Leaks are not checked: MLIR and protobuf keep process-lifetime singletons.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
"$binary" "$corpus" "$seeds/$target" "${regressions[@]}" -max_total_time="$seconds" \
  -timeout=30 -rss_limit_mb=4096 -max_len=$max_len -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "${fork[@]}" "$@" > "$log" 2>&1 || status=$?
executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
coverage=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*' || true)
features=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*' || true)
corpus_size=$(ls "$corpus" | wc -l)
line="$(date -u +%FT%TZ) $target ${seconds}s status=$status executions=${executions:-?} cov=${coverage:-?} ft=${features:-?} corpus=$corpus_size log=$log"
echo "$line" | tee -a "$build/fuzz-runs.log"
if [ "$status" -ne 0 ]; then
  grep -E 'ERROR|SUMMARY|runtime error|Test unit written|==[0-9]+==' "$log" | head -20 >&2
  echo "fuzz/run.sh: $target failed (status $status); inputs in $artifacts, log $log" >&2
fi
exit "$status"
