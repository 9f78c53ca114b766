#!/usr/bin/env bash
# Mutation check: applies each mutant of tests/mutants/ alone, rebuilds, and reports which test kills it.
#
# usage: scripts/services.sh start && source "$OUTBOXD_SCRATCH/services.env"
#        scripts/mutants.sh [NAME...]      # NAME: a patch's file name or its number prefix (004)
#        scripts/mutants.sh --check        # only that every mutant still applies (ctest mutants.apply)
#
# Services must be running: PostgreSQL and RabbitMQ for the named tests; the
# whole suite, run for a mutant that survives them, wants Artemis too (without
# it, the tests that need it skip, and cannot kill a mutant). The build
# directory is OUTBOXD_BUILD_DIR (default build/), configured already. A mutant is a unified diff whose
# leading lines say which tests should kill it:
#   Kill-ctest: <ctest -R regex>
#   Kill-pytest: <test file> <pytest -k expression>
# The named tests run first, until one fails (every one of them with
# OUTBOXD_MUTANTS_EVERY=1); only if none fails does the whole suite run
# (ctest -L 'unit|integration|fault'). The tree is restored after each mutant,
# on failure and on Ctrl-C too; the build is brought back to the clean tree
# at the end (after Ctrl-C, by the next build). Logs: <build>/mutants/NAME.log.
# Not part of CI: a mutant costs seconds to minutes, the whole suite minutes.
set -euo pipefail

cd "$(dirname "$(readlink -f "$0")")/.."

# A mutant whose lines the code no longer has cannot be applied, and would
# test nothing: the check fails until it is written again for the code.
if [[ ${1:-} == --check ]]; then
  stale=0
  for patch in tests/mutants/*.patch; do
    git apply --check "$patch" 2>/dev/null || { echo "mutants.sh: $patch no longer applies" >&2; stale=1; }
  done
  exit "$stale"
fi
build=${OUTBOXD_BUILD_DIR:-build}
python=/usr/bin/python3

if [[ -z ${OUTBOXD_TEST_PG_URL:-} ]]; then
  echo "mutants.sh: services not running: scripts/services.sh start, then source its services.env" >&2
  exit 2
fi
if [[ ! -f $build/build.ninja && ! -f $build/Makefile ]]; then
  echo "mutants.sh: $build is not a configured build directory (set OUTBOXD_BUILD_DIR)" >&2
  exit 2
fi
OUTBOXD_BIN=$(cd "$build" && pwd)/daemon/outboxd
export OUTBOXD_REQUIRE_SERVICES=1 OUTBOXD_BIN
# The whole suite also wants Artemis: without it, its tests skip rather than fail.
suite_requires=1
for service in RABBITMQ ARTEMIS; do
  url=OUTBOXD_TEST_${service}_URL
  if [[ -z ${!url:-} ]]; then
    echo "mutants.sh: $url is not set: the whole-suite runs skip the tests that need it" >&2
    suite_requires=0
  fi
done
logs=$build/mutants
mkdir -p "$logs"

patches=()
if (($# == 0)); then
  patches=(tests/mutants/*.patch)
else
  for name in "$@"; do
    matches=(tests/mutants/"${name%.patch}"*.patch)
    [[ -f ${matches[0]} ]] || { echo "mutants.sh: no mutant $name" >&2; exit 2; }
    patches+=("${matches[@]}")
  done
fi

applied=""
restore() {
  if [[ -n $applied ]]; then
    git apply -R "$applied"
    applied=""
  fi
}
trap restore EXIT
trap 'restore; exit 130' INT TERM

# Names of the tests that failed, from a ctest or pytest log, comma-separated.
ctest_failures() { sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (\(Failed\|Timeout\|Not Run\|Exception\|SEGFAULT\|Subprocess aborted\)).*/\1/p' "$1" | paste -sd, -; }
pytest_failures() { sed -n 's/^\(FAILED\|ERROR\) [^:]*::\([^ ]*\).*/\2/p' "$1" | paste -sd, -; }

# Runs the tests a mutant names; prints the failing ones (empty: it survived).
# A header naming no test, or a selection that matches none, is an error.
run_named() {
  local patch=$1 log=$2 killers="" key value file expr status
  while IFS= read -r line; do
    key=${line%%:*}
    value=${line#*: }
    case $key in
      Kill-ctest)
        status=0
        ctest --test-dir "$build" -R "$value" --no-tests=error --output-on-failure >"$log.ctest" 2>&1 || status=$?
        cat "$log.ctest" >>"$log"
        if grep -q '^No tests were found' "$log.ctest"; then
          echo "mutants.sh: $patch: ctest regex '$value' matches no test" >&2
          return 2
        fi
        ((status == 0)) || killers+="$(ctest_failures "$log.ctest"),"
        ;;
      Kill-pytest)
        file=${value%% *}
        expr=${value#* }
        status=0
        timeout 900 "$python" -m pytest -q -p no:cacheprovider -rfE "$file" -k "$expr" >"$log.pytest" 2>&1 || status=$?
        cat "$log.pytest" >>"$log"
        if ((status == 4 || status == 5)); then
          echo "mutants.sh: $patch: pytest selection '$value' is wrong or matches no test" >&2
          return 2
        fi
        ((status == 0)) || killers+="$(pytest_failures "$log.pytest"),"
        ;;
    esac
    [[ -z $killers || -n ${OUTBOXD_MUTANTS_EVERY:-} ]] || break  # one killer is enough
  done < <(sed -n '/^diff --git/q;/^Kill-\(ctest\|pytest\): /p' "$patch")
  killers=${killers%,}
  [[ -z $killers && $status != 0 ]] && killers="(failed, see $log)"
  printf '%s' "$killers"
}

rows=()
for patch in "${patches[@]}"; do
  name=$(basename "$patch" .patch)
  log=$logs/$name.log
  : >"$log"
  started=$SECONDS
  if ! grep -q '^Kill-\(ctest\|pytest\): ' "$patch"; then
    echo "mutants.sh: $patch names no test to kill it" >&2
    exit 2
  fi
  if ! git apply --check "$patch" 2>/dev/null; then
    echo "mutants.sh: $patch does not apply to this tree: write it again against the current code" >&2
    exit 2
  fi
  touched=$(git apply --numstat "$patch" | cut -f3)
  # shellcheck disable=SC2086 # one path per word
  if ! git diff --quiet HEAD -- $touched; then
    echo "mutants.sh: $patch touches files with local changes; commit or stash them first" >&2
    exit 2
  fi
  echo "== $name" >&2
  git apply "$patch"
  applied=$patch
  killed=yes
  if ! cmake --build "$build" >>"$log" 2>&1; then
    by="(does not build)"
  else
    by=$(run_named "$patch" "$log")
    if [[ -z $by ]]; then
      echo "   survived its tests; running the whole suite" >&2
      status=0
      OUTBOXD_REQUIRE_SERVICES=$suite_requires ctest --test-dir "$build" -L 'unit|integration|fault' \
        --output-on-failure >>"$log" 2>&1 || status=$?
      by=$(ctest_failures "$log")
      [[ $status == 0 || -n $by ]] || by="(failed, see $log)"
      [[ $status != 0 ]] || killed=no
    fi
  fi
  restore
  rows+=("$(printf '%-58s %-7s %6ss  %s' "$name" "$killed" "$((SECONDS - started))" "${by:--}")")
  echo "   killed: $killed ${by:+by $by} ($((SECONDS - started)) s)" >&2
done

echo "   rebuilding the clean tree" >&2
cmake --build "$build" >/dev/null
printf '%-58s %-7s %7s  %s\n' mutant killed time "killed by"
printf '%s\n' "${rows[@]}"
