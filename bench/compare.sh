#!/usr/bin/env bash
# Same-run A/B gate: builds two versions of outboxd in Release and runs them alternately on one machine.
#
#   bench/compare.sh [--pairs N] [--rows N] [--sessions K] [--rate R] [--writers W] [--seconds S]
#                    [--bulk-rows N] [--bulk-sessions K] [--bulk-seconds S] [--phase-seconds S] [--fsync]
#                    [--body BYTES] [--broker-max-length N]
#                    [--workloads drain,keep,steady,writers,bulk] BASE [HEAD]
#   bench/compare.sh --alone [the same options]
#
# BASE and HEAD are git refs; HEAD defaults to the working tree as it is. Each is
# built (target outboxd only) into .scratch/compare/<commit>/ (the working tree
# into build-release/), PostgreSQL and RabbitMQ are started in
# .scratch/compare/services, and bench/compare.py runs the workloads in N
# alternating pairs (default 3) and prints a table of medians with HEAD/BASE
# ratios and the database floor. Exits 1 when HEAD's drain rate is below 0.97x
# BASE's or its PostgreSQL CPU or WAL per row above 1.05x; 2 for bad usage.
# --fsync runs PostgreSQL with fsync on, as Debian installs it (the scratch
# cluster otherwise runs with fsync off); the cluster restarts to change it.
# --alone runs the working tree's build only, for figures of one version.
# --broker-max-length N keeps only the newest N messages of each queue of the
# run in RabbitMQ, for drains of millions of rows (--rows 10000000 --body 100
# --broker-max-length 10: a long queue at its limit costs RabbitMQ a core).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

usage() {
  sed -n '4,9p' "$0" | sed 's/^# \{0,3\}//' >&2
  exit 2
}

passed=()
refs=()
alone=0
while (($#)); do
  case $1 in
    --pairs | --rows | --sessions | --rate | --writers | --seconds | --workloads | --bulk-rows | --bulk-sessions | \
      --bulk-seconds | --phase-seconds | --body | --broker-max-length)
      (($# > 1)) || usage
      passed+=("$1" "$2")
      shift
      ;;
    --fsync) export OUTBOXD_PG_FSYNC=on ;;
    --alone) alone=1 ;;
    -h | --help) usage ;;
    -*) usage ;;
    *) refs+=("$1") ;;
  esac
  shift
done
if ((alone)); then ((${#refs[@]} == 0)) || usage; else ((${#refs[@]} == 1 || ${#refs[@]} == 2)) || usage; fi

# Builds commit $1 (outboxd only) from its own tree; prints the binary's path.
build_commit() {
  local sha=$1 dir=$root/.scratch/compare/$1
  if [[ ! -x $dir/build/daemon/outboxd ]]; then
    rm -rf "$dir"
    mkdir -p "$dir/src"
    git archive "$sha" | tar -x -C "$dir/src"
    cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DOUTBOXD_TESTS=OFF \
      -DOUTBOXD_SANITIZE=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >"$dir/cmake.log" 2>&1 ||
      { cat "$dir/cmake.log" >&2; exit 1; }
    echo "compare.sh: building $sha" >&2
    cmake --build "$dir/build" --target outboxd -- --quiet >&2
  fi
  echo "$dir/build/daemon/outboxd"
}

# The working tree's Release build: HEAD by default, and the measuring tools in any case.
scripts/setup.sh --release --target outboxd --target latency_consumer
sides=()
for ref in "${refs[@]}"; do
  sha=$(git rev-parse --verify --quiet "$ref^{commit}") || { echo "compare.sh: no commit $ref" >&2; exit 2; }
  sides+=("$(git rev-parse --short "$sha")=$(build_commit "$sha")")
done
if ((${#refs[@]} < 2)); then
  label=$(git rev-parse --short HEAD)
  [[ -z $(git status --porcelain -- lib daemon sql CMakeLists.txt cmake) ]] || label+="+changes"
  sides+=("$label=$root/build-release/daemon/outboxd")
fi

export OUTBOXD_SCRATCH="$root/.scratch/compare/services"
export OUTBOXD_SERVICES="pg rabbitmq"
# A running cluster keeps the fsync setting it started with.
scripts/services.sh stop-pg >/dev/null 2>&1 || true
scripts/services.sh start
trap 'scripts/services.sh stop' EXIT
# shellcheck disable=SC1091
source "$OUTBOXD_SCRATCH/services.env"
args=()
for side in "${sides[@]}"; do args+=(--side "$side"); done
/usr/bin/python3 bench/compare.py --tools build-release "${args[@]}" "${passed[@]}"
