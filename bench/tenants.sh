#!/usr/bin/env bash
# Many outboxes in one daemon: connections held, idle tenants' first rows, memory (bench/tenants.py).
#
#   bench/tenants.sh --schemas 1000 --budget 4
#   bench/tenants.sh --databases 1000 --budget 32 --idle-check-ms 10000
#
# Builds Release, starts PostgreSQL and RabbitMQ in .scratch/bench, and runs bench/tenants.py with the
# arguments given.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/setup.sh --release
export OUTBOXD_SCRATCH="${OUTBOXD_SCRATCH:-$root/.scratch/bench}"
export OUTBOXD_SERVICES="pg rabbitmq"
scripts/services.sh start
trap 'scripts/services.sh stop' EXIT
# shellcheck disable=SC1091
source "$OUTBOXD_SCRATCH/services.env"
/usr/bin/python3 bench/tenants.py --build build-release "$@"
