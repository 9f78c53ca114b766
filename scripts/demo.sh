#!/usr/bin/env bash
# Demo on a fresh Debian 12 machine: build, throwaway PostgreSQL and RabbitMQ, migrations,
# then outboxd dispatching a workload.
#
# Usage: scripts/demo.sh
# Services run from ${OUTBOXD_SCRATCH:-.scratch/demo} and are stopped on exit
# (OUTBOXD_DEMO_KEEP=1 leaves them running).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
root=$PWD

scripts/setup.sh
export OUTBOXD_SCRATCH=${OUTBOXD_SCRATCH:-$root/.scratch/demo}
if [[ ${OUTBOXD_DEMO_KEEP:-0} != 1 ]]; then
  trap '"$root/scripts/services.sh" stop' EXIT
fi
OUTBOXD_SERVICES="pg rabbitmq" scripts/services.sh start
# shellcheck source=/dev/null
source "$OUTBOXD_SCRATCH/services.env"

database=outboxd_demo
if [[ -z $(psql -XAtc "SELECT 1 FROM pg_database WHERE datname = '$database'") ]]; then
  psql -Xqc "CREATE DATABASE $database"
fi

config=$OUTBOXD_SCRATCH/demo.yaml
cat >"$config" <<EOF
# Written by scripts/demo.sh for the services in $OUTBOXD_SCRATCH.
database:
  url: postgresql://postgres@127.0.0.1:$PGPORT/$database
broker:
  url: $OUTBOXD_TEST_RABBITMQ_URL
  profile: rabbitmq
  username: $OUTBOXD_TEST_RABBITMQ_USER
  password: $OUTBOXD_TEST_RABBITMQ_PASSWORD
outbox:
  schema: outbox
EOF

build/daemon/outboxd migrate -c "$config"

# --- DEMO: the daemon run and the workload go here ------------------------------
# Start `build/daemon/outboxd run -c "$config"`, enqueue immediate and scheduled rows
# (outbox.enqueue), show progress (`outboxd status`), then stop the daemon.
# ---------------------------------------------------------------------------------
echo "demo: database migrated; config in $config"
