#!/usr/bin/env bash
# Runs the pgTAP tests of sql/ (tests/sql/[0-9]*.sql), each file in a fresh database, and prints pg_prove's summary.
#
# Usage: tests/sql/run.sh [pg_prove options] [test files]
#   OUTBOXD_TEST_PG_URL   superuser conninfo or URI of a running server, e.g.
#                         postgresql://postgres@127.0.0.1:55432/postgres. Unset: a
#                         scratch cluster is created in a temporary directory
#                         (Debian's postgresql-15 binaries) and removed afterwards.
#   OUTBOXD_SQLTEST_JOBS  parallel test files (default 4).
#   OUTBOXD_SQLTEST_KEEP  non-empty: keep the databases for inspection.
#
# The migrations are applied once, with plain psql and default names, to a
# template database that also gets pgTAP, dblink and support/helpers.sql; every
# test file runs in its own copy of it. The dblink tests connect back to the
# server through its socket as the same user, so that must not need a password.
# Roles are cluster-wide: outbox_writer and outbox_dispatcher, and the writer
# login roles app_a and app_b of the tests that keep writers apart (connected
# through dblink, so they must not need a password either), are created if
# missing and left in place; the LOGIN roles that hold only one group role
# each, for tests that run as the role itself (sqltest.try_as_member), are made for
# the run and dropped with the template.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
scratch=""

stop_scratch() {
  [ -n "$scratch" ] || return 0
  as_postgres "$bindir/pg_ctl" -D "$scratch/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$scratch"
}

as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_scratch() {
  bindir=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  [ -x "$bindir/initdb" ] || { echo "run.sh: OUTBOXD_TEST_PG_URL unset and no PostgreSQL server binaries found" >&2; exit 2; }
  scratch=$(mktemp -d /tmp/outboxd-sqltest.XXXXXX)
  if [ "$(id -u)" = 0 ]; then chown postgres "$scratch"; fi
  as_postgres "$bindir/initdb" -D "$scratch/data" -A trust -U postgres --no-sync >/dev/null
  # Socket only, in a private directory: no port can clash.
  as_postgres "$bindir/pg_ctl" -D "$scratch/data" -l "$scratch/log" -w \
    -o "-p 5432 -k $scratch -c listen_addresses='' -c fsync=off -c max_connections=100" start >/dev/null
  OUTBOXD_TEST_PG_URL="postgresql://postgres@/postgres?host=$scratch&port=5432"
}

url=${OUTBOXD_TEST_PG_URL:-}
template="outboxd_sqltest_$$"
cleanup() {
  if [ -z "${OUTBOXD_SQLTEST_KEEP:-}" ]; then
    psql -X -q -d "$url" -c "DROP DATABASE IF EXISTS \"$template\" WITH (FORCE)" \
      -c "DROP ROLE IF EXISTS \"${template}_writer\"" -c "DROP ROLE IF EXISTS \"${template}_dispatcher\"" \
      >/dev/null 2>&1 || true
  fi
  stop_scratch
}
trap cleanup EXIT

if [ -z "$url" ]; then
  start_scratch
  url=$OUTBOXD_TEST_PG_URL
fi

in_template() { psql -X -q -v ON_ERROR_STOP=1 -d "$url" -c "\\connect \"$template\"" "$@"; }

psql -X -q -v ON_ERROR_STOP=1 -d "$url" -c "CREATE DATABASE \"$template\"" >/dev/null
for script in "$root"/sql/[0-9][0-9][0-9]_*.sql; do
  # The equivalent of psql -1 -f: \connect must come before the transaction.
  in_template -c 'BEGIN' -f "$script" -c 'COMMIT' >/dev/null
done
in_template -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION dblink' -f "$here/support/helpers.sql" >/dev/null
for group in writer dispatcher; do
  psql -X -q -v ON_ERROR_STOP=1 -d "$url" -c "CREATE ROLE \"${template}_$group\" LOGIN IN ROLE outbox_$group" >/dev/null
  in_template -c "INSERT INTO sqltest.login_roles VALUES ('outbox_$group', '${template}_$group')" >/dev/null
done

export OUTBOXD_SQLTEST_URL=$url OUTBOXD_SQLTEST_TEMPLATE=$template OUTBOXD_SQLTEST_ROOT=$root

tests=()
options=()
for arg in "$@"; do
  case "$arg" in
    *.sql) tests+=("$arg") ;;
    *) options+=("$arg") ;;
  esac
done
[ ${#tests[@]} -gt 0 ] || tests=("$here"/[0-9]*.sql)

pg_prove -j "${OUTBOXD_SQLTEST_JOBS:-4}" -b "$here/support/psql_fresh_db.sh" ${options[@]+"${options[@]}"} "${tests[@]}"
