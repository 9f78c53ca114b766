# shellcheck shell=bash
# Sourced by bench scripts: a database of its own, migrated, with a dispatcher login role; dropped on exit.
#
# After `scratch_db NAME`: $db, $dispatcher, $work (a temporary directory),
# $work/run.yaml (a config that connects as $dispatcher) and
# `scratch_psql` (psql on $db as the superuser). Needs the PostgreSQL of
# scripts/services.sh (source its services.env) and $build/daemon/outboxd.
: "${OUTBOXD_TEST_PG_URL:?source the services.env of scripts/services.sh}"
: "${build:?set build to the build directory before sourcing}"

scratch_cleanup() {
  psql -X -q -d "$OUTBOXD_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" \
    -c "DROP ROLE IF EXISTS $dispatcher" >/dev/null || true
  rm -rf "$work"
}

scratch_psql() { psql -X -q -d "${OUTBOXD_TEST_PG_URL%/*}/$db" -v ON_ERROR_STOP=1 "$@"; }

scratch_db() {
  local base=${OUTBOXD_TEST_PG_URL%/*}
  db="$1_$$"
  dispatcher="${db}_dispatcher"
  work=$(mktemp -d)
  trap scratch_cleanup EXIT
  psql -X -q -d "$OUTBOXD_TEST_PG_URL" -c "CREATE DATABASE $db"
  printf 'database:\n  url: "%s/%s"\nbroker:\n  url: "amqp://127.0.0.1:5672"\n' "$base" "$db" >"$work/migrate.yaml"
  "$build/daemon/outboxd" migrate -c "$work/migrate.yaml" >/dev/null
  scratch_psql -c "CREATE ROLE $dispatcher LOGIN IN ROLE outbox_dispatcher"
  printf 'database:\n  url: "%s/%s"\nbroker:\n  url: "amqp://127.0.0.1:5672"\n' \
    "${base/postgres@/$dispatcher@}" "$db" >"$work/run.yaml"
}
