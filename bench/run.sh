#!/usr/bin/env bash
# outboxd benchmark: drain rate and latency beside the broker's and the database's ceilings.
#
#   bench/run.sh [--rows N] [--sessions K] [--window W] [--runs R] [--broker rabbitmq|artemis]
#                [--instances N] [--rate ROWS_PER_S --seconds S] [--writer-cost]
#   bench/run.sh --noisy-neighbour [--rows N] [--sessions K] [--runs R] [--delay S] [--broker ...]
#
# Builds Release, starts PostgreSQL and the broker in .scratch/bench, and runs
# bench/bench.py, which prints medians of R runs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

broker=rabbitmq
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [[ "${args[$i]}" == "--broker" ]]; then broker="${args[$((i + 1))]}"; fi
done

scripts/setup.sh --release
export OUTBOXD_SCRATCH="${OUTBOXD_SCRATCH:-$root/.scratch/bench}"
export OUTBOXD_SERVICES="pg $broker"
scripts/services.sh start
trap 'scripts/services.sh stop' EXIT
# shellcheck disable=SC1091
source "$OUTBOXD_SCRATCH/services.env"
if [[ "${1:-}" == "--noisy-neighbour" ]]; then
  shift
  /usr/bin/python3 bench/noisy_neighbour.py --build build-release "$@"
else
  /usr/bin/python3 bench/bench.py --build build-release "$@"
fi
