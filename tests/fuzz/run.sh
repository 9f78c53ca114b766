#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each over its seed corpus.
#
# Usage: tests/fuzz/run.sh [RUNS]           each target for RUNS inputs (default 20000)
#        tests/fuzz/run.sh --time SECONDS   each target for SECONDS
# The build tree is $OUTBOXD_FUZZ_BUILD (default build-fuzz); inputs libFuzzer finds and any
# crash reproducer go to its fuzz/ directory, never into the committed corpus.
# Prints executions, coverage and crashes per target; exits non-zero when a target crashed.
# Reproduce a crash: build-fuzz/tests/fuzz/TARGET_fuzz build-fuzz/fuzz/TARGET/crash-...
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
root=$PWD

limit=(-runs=20000)
case ${1:-} in
  "") ;;
  --time) limit=(-max_total_time="${2:?--time needs SECONDS}") ;;
  *[!0-9]*) echo "usage: $0 [RUNS | --time SECONDS]" >&2; exit 2 ;;
  *) limit=(-runs="$1") ;;
esac

cxx=${OUTBOXD_FUZZ_CXX:-clang++-15}
command -v "$cxx" >/dev/null || { echo "run.sh: $cxx not found (scripts/setup.sh installs clang-15)" >&2; exit 1; }
build=${OUTBOXD_FUZZ_BUILD:-$root/build-fuzz}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# Release-like code with debug info: faster inputs, still readable stack traces. OUTBOXD_SANITIZE
# is off because the fuzz targets choose their own sanitizers (tests/fuzz/CMakeLists.txt).
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DOUTBOXD_FUZZ=ON -DOUTBOXD_TESTS=OFF -DOUTBOXD_SANITIZE=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" --target outboxd_fuzz

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
printf '%-8s %12s %8s %8s\n' target executions cov crashes
for target in config url headers message; do
  work=$build/fuzz/$target
  mkdir -p "$work/new"
  seeds=$root/tests/fuzz/corpus/$target
  dict=()
  [[ -f $root/tests/fuzz/$target.dict ]] && dict=(-dict="$root/tests/fuzz/$target.dict")
  log=$work/last.log
  status=0
  # New inputs go to the first directory; the committed seeds are only read.
  "$build/tests/fuzz/${target}_fuzz" "${limit[@]}" "${dict[@]}" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/" "$work/new" "$seeds" >"$log" 2>&1 || status=$?
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  crashes=0
  if ((status != 0)); then
    crashes=1
    failed+=("$target")
  fi
  printf '%-8s %12s %8s %8s\n' "$target" "${executions:-?}" "${cov:-?}" "$crashes"
done
if ((${#failed[@]})); then
  for target in "${failed[@]}"; do
    echo "== $target crashed; log $build/fuzz/$target/last.log; reproducer(s):"
    ls "$build/fuzz/$target"/{crash,leak,timeout,oom}-* 2>/dev/null || true
    grep -m1 -A12 -E '^==[0-9]+==ERROR|runtime error' "$build/fuzz/$target/last.log" || true
  done
  exit 1
fi
