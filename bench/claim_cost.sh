#!/usr/bin/env bash
# The claim's cost in a backlog of N pending rows over D destinations: a fresh database, then bench/claim_cost.
#
#   bench/claim_cost.sh ROWS DESTINATIONS [PER_DESTINATION] [RUNS]   e.g. bench/claim_cost.sh 1000000 10000
#
# Needs the PostgreSQL of scripts/services.sh (source its services.env) and a
# build with the claim_cost target (BUILD, default build). One destination,
# bulk, takes the first rows; each of the other DESTINATIONS - 1 then takes
# PER_DESTINATION rows (default 10), interleaved, up to ROWS in all: a backlog
# with many small destinations behind it, as the claim by destination meets
# it. Every row is due now and in a session of its own (1 in 100 share one).
# bench/claim_cost times RUNS (default 11) claims of each kind. The database
# is dropped afterwards.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rows=${1:?usage: bench/claim_cost.sh ROWS DESTINATIONS [PER_DESTINATION] [RUNS]}
destinations=${2:?usage: bench/claim_cost.sh ROWS DESTINATIONS [PER_DESTINATION] [RUNS]}
per=${3:-10}
runs=${4:-11}
build=${BUILD:-$root/build}
others=$(((destinations - 1) * per))
((others < rows)) || { echo "claim_cost.sh: ROWS must exceed (DESTINATIONS - 1) * PER_DESTINATION" >&2; exit 2; }
# shellcheck source=bench/scratch_db.sh
source "$root/bench/scratch_db.sh"
scratch_db claim_cost
scratch_psql <<SQL
INSERT INTO outbox.messages (message_id, destination, session_id)
SELECT 'b' || i, 'bulk', 's' || (i % ($rows / 100 + 1)) FROM generate_series(1, $rows - $others) i;
INSERT INTO outbox.messages (message_id, destination, session_id)
SELECT 'o' || i, 'destination-' || (i % ($destinations - 1)), 'o' || i FROM generate_series(1, $others) i;
VACUUM ANALYZE outbox.messages;
SQL
echo "claim_cost: $rows rows: $((rows - others)) to bulk, $per to each of $((destinations - 1)) others"
"$build/bench/claim_cost" -c "$work/run.yaml" "$runs"
