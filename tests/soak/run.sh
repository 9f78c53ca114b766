#!/usr/bin/env bash
# The soak: 1,000,000 rows through 100 kill -9s, 10 broker and 10 PostgreSQL restarts and 3 failovers.
#
# Usage: tests/soak/run.sh [--build DIR] [soak options...]
#   --build DIR   where outboxd and bench/latency_consumer are (default: build-release if built, else build)
#   soak options: --rows --kills --broker-restarts --pg-restarts --failovers --writers --sessions
#                 --batch --rate --kill-span --in-flight --batch-size ... (tests/soak/soak.py --help)
# Starts a RabbitMQ node of its own (scripts/services.sh in .scratch/soak) and two PostgreSQL
# clusters of its own; prints one table; exits non-zero when a guarantee broke. Not part of
# scripts/test.sh: tests/fault/test_soak.py runs the same code with small counts.
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
build=$root/build-release
[[ -x $build/daemon/outboxd ]] || build=$root/build
if [[ ${1:-} == --build ]]; then
  build=$(realpath "$2")
  shift 2
fi
for tool in "$build/daemon/outboxd" "$build/bench/latency_consumer"; do
  [[ -x $tool ]] || { echo "run.sh: $tool is missing: cmake --build $build --target outboxd latency_consumer" >&2; exit 2; }
done

export OUTBOXD_SCRATCH=$root/.scratch/soak
cleanup() { "$root/scripts/services.sh" clean >/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
OUTBOXD_SERVICES=rabbitmq "$root/scripts/services.sh" start
# shellcheck source=/dev/null
source "$OUTBOXD_SCRATCH/services.env"
export OUTBOXD_BIN=$build/daemon/outboxd OUTBOXD_REQUIRE_SERVICES=1
echo "soak: $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD || echo ' (uncommitted changes)'), $build, $(nproc) cores"
/usr/bin/python3 "$root/tests/soak/soak.py" --consumer "$build/bench/latency_consumer" \
  --services-sh "$root/scripts/services.sh" --scratch "$OUTBOXD_SCRATCH" "$@"
