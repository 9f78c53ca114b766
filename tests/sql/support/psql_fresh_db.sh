#!/usr/bin/env bash
# psql stand-in for pg_prove (-b): runs one test file in its own copy of the template database.
#
# pg_prove calls it as `psql <options> --file <test.sql>`. Needs OUTBOXD_SQLTEST_URL
# (superuser conninfo) and OUTBOXD_SQLTEST_TEMPLATE (database with the migrations,
# pgTAP, dblink and support/helpers.sql), both set by run.sh.
set -euo pipefail

: "${OUTBOXD_SQLTEST_URL:?set by tests/sql/run.sh}"
: "${OUTBOXD_SQLTEST_TEMPLATE:?set by tests/sql/run.sh}"

file=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --file|-f) file=$2; shift 2 ;;
    --dbname|-d) shift 2 ;;  # the database is ours to choose
    *) args+=("$1"); shift ;;
  esac
done
[ -n "$file" ] || { echo "psql_fresh_db.sh: no --file given" >&2; exit 2; }

name=$(basename "$file" .sql | tr '[:upper:]' '[:lower:]' | tr -c 'a-z0-9_\n' '_')
db="${OUTBOXD_SQLTEST_TEMPLATE}_${name}"

admin() { psql -X -q -v ON_ERROR_STOP=1 -d "$OUTBOXD_SQLTEST_URL" "$@" >/dev/null; }

admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" 2>/dev/null
admin -c "CREATE DATABASE \"$db\" TEMPLATE \"$OUTBOXD_SQLTEST_TEMPLATE\""
if [ -z "${OUTBOXD_SQLTEST_KEEP:-}" ]; then
  trap 'admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" || true' EXIT
fi

# \connect keeps host, port and user of the URL and switches the database.
rc=0
psql "${args[@]}" -d "$OUTBOXD_SQLTEST_URL" -c "\\connect \"$db\"" --file "$file" || rc=$?
exit "$rc"
