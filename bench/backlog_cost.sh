#!/usr/bin/env bash
# The backlog measurement's cost with N pending rows: a fresh database, N rows, then bench/backlog_cost.
#
#   bench/backlog_cost.sh ROWS [RUNS] [DESTINATIONS] [REPEATS]   e.g. bench/backlog_cost.sh 1000000 11 10000 3
#
# Needs the PostgreSQL of scripts/services.sh (source its services.env) and a
# build with the backlog_cost target (BUILD, default build). The rows spread
# evenly over DESTINATIONS destinations (default 10), ten consecutive rows to
# each in turn: 90% due now, 10% scheduled an hour ahead, 1 in 1000 retrying
# and 1 in 1000 parked. bench/backlog_cost runs REPEATS times (default 1) on
# that database, each time RUNS timings of each statement. The database is
# dropped afterwards.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rows=${1:?usage: bench/backlog_cost.sh ROWS [RUNS] [DESTINATIONS] [REPEATS]}
runs=${2:-11}
destinations=${3:-10}
repeats=${4:-1}
build=${BUILD:-$root/build}
# shellcheck source=bench/scratch_db.sh
source "$root/bench/scratch_db.sh"
scratch_db backlog_cost
scratch_psql <<SQL
INSERT INTO outbox.messages (message_id, destination, due_at)
SELECT 'm' || i, 'destination-' || (i / 10 % $destinations),
       CASE WHEN i % 10 = 0 THEN now() + interval '1 hour' ELSE now() END
  FROM generate_series(1, $rows) i;
UPDATE outbox.messages SET attempts = 1, next_attempt_at = now() + interval '1 minute' WHERE id % 1000 = 1;
UPDATE outbox.messages SET status = 'parked' WHERE id % 1000 = 2;
VACUUM ANALYZE outbox.messages;
SQL
for _ in $(seq "$repeats"); do
  "$build/bench/backlog_cost" -c "$work/run.yaml" "$runs"
done
