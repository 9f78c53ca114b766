#!/usr/bin/env bash
# Instructions the server executes per writer statement, counted by callgrind: repeatable to a few
# parts in a thousand, where a timed run on a shared machine drifts by tens of percent.
#
#   bench/insert_cost.sh [--statements N] LABEL=OUTBOXD...
#
# Each outboxd migrates a database of its own in a scratch PostgreSQL cluster (fsync off); then,
# with the cluster stopped, `postgres --single` runs under callgrind once with 200 statements and
# once with 200 + N (default 300), each statement its own transaction as in an application's
# transaction that writes one message, and the difference per statement is printed for:
#   enqueue     SELECT outbox.enqueue(...) of a 500-byte body in one of 10,000 sessions
#   correlated  the same with a correlation_id, one of 10,000 (messages_correlation_idx)
#   insert      the same row by a plain INSERT INTO outbox.messages
#   bare        the same row into a table with the same columns and only a primary key
# bare/enqueue is the share of the bare INSERT's rate that enqueue() could reach on instructions alone.
# Single-user mode runs as the bootstrap superuser, so what it counts is the statement's own
# work, not privilege checks; it runs no daemon, so the wake-up check finds no idle instance.
set -euo pipefail

usage() {
  sed -n '4,5p' "$0" | sed 's/^# \{0,3\}//' >&2
  exit 2
}

statements=300
sides=()
while (($#)); do
  case $1 in
    --statements)
      (($# > 1)) || usage
      statements=$2
      shift
      ;;
    -*) usage ;;
    *=*) sides+=("$1") ;;
    *) usage ;;
  esac
  shift
done
((${#sides[@]} > 0)) || usage
command -v valgrind >/dev/null || { echo "insert_cost.sh: valgrind is not installed" >&2; exit 2; }

bindir=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
scratch=$(mktemp -d /tmp/outboxd-insert-cost-XXXXXX)
chmod 755 "$scratch"
as_postgres() {
  if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}
[[ $(id -u) == 0 ]] && chown postgres "$scratch"
cleanup() {
  as_postgres "$bindir/pg_ctl" -D "$scratch/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT

as_postgres "$bindir/initdb" -D "$scratch/data" -A trust -U postgres >/dev/null
cat >>"$scratch/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$scratch'
fsync = off
autovacuum = off
EOF
as_postgres "$bindir/pg_ctl" -D "$scratch/data" -l "$scratch/server.log" -w start >/dev/null

psql_as() { as_postgres psql -X -q -v ON_ERROR_STOP=1 -h "$scratch" -U postgres "$@"; }
for side in "${sides[@]}"; do
  label=${side%%=*} binary=$(realpath "${side#*=}")
  db="cost_$label"
  psql_as -d postgres -c "CREATE DATABASE \"$db\""
  printf 'database:\n  url: "host=%s dbname=%s user=postgres"\nbroker:\n  url: "amqp://127.0.0.1:5672"\n' \
    "$scratch" "$db" >"$scratch/$label.yaml"
  chmod 644 "$scratch/$label.yaml"
  "$binary" migrate -c "$scratch/$label.yaml" >/dev/null
  psql_as -d "$db" -c "CREATE TABLE public.bare (LIKE outbox.messages INCLUDING DEFAULTS INCLUDING IDENTITY)" \
    -c "ALTER TABLE public.bare ADD PRIMARY KEY (id), ALTER COLUMN partition SET DEFAULT 0"
done
as_postgres "$bindir/pg_ctl" -D "$scratch/data" -m fast -w stop >/dev/null

row="gen_random_uuid()::text, 'writers', 's' || (random() * 10000)::int, convert_to(lpad('x', 500, 'x'), 'UTF8')"
declare -A statement=(
  [enqueue]="SELECT outbox.enqueue(destination => 'writers', message_id => gen_random_uuid()::text, session_id => 's' || (random() * 10000)::int, body => convert_to(lpad('x', 500, 'x'), 'UTF8'));"
  [correlated]="SELECT outbox.enqueue(destination => 'writers', message_id => gen_random_uuid()::text, session_id => 's' || (random() * 10000)::int, correlation_id => 'c' || (random() * 10000)::int, body => convert_to(lpad('x', 500, 'x'), 'UTF8'));"
  [insert]="INSERT INTO outbox.messages (message_id, destination, session_id, body) VALUES ($row);"
  [bare]="INSERT INTO public.bare (message_id, destination, session_id, body) VALUES ($row);"
)

# Instructions of one single-user session running `count` copies of `text` in database `db`.
instructions() {
  local db=$1 text=$2 count=$3
  awk -v n="$count" -v text="$text" 'BEGIN { for (i = 0; i < n; i++) print text }' >"$scratch/input.sql"
  as_postgres valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "$bindir/postgres" --single -D "$scratch/data" "$db" <"$scratch/input.sql" >/dev/null 2>"$scratch/valgrind.log"
  grep -o 'Collected : [0-9]*' "$scratch/valgrind.log" | awk '{print $3}'
}

printf '%-12s %12s %12s %12s %12s %14s\n' side enqueue correlated insert bare bare/enqueue
for side in "${sides[@]}"; do
  label=${side%%=*}
  declare -A per=()
  for kind in enqueue correlated insert bare; do
    warm=$(instructions "cost_$label" "${statement[$kind]}" 200)
    full=$(instructions "cost_$label" "${statement[$kind]}" $((200 + statements)))
    per[$kind]=$(((full - warm) / statements))
  done
  printf '%-12s %12s %12s %12s %12s %14s\n' "$label" "${per[enqueue]}" "${per[correlated]}" "${per[insert]}" "${per[bare]}" \
    "$(awk -v e="${per[enqueue]}" -v b="${per[bare]}" 'BEGIN { printf "%.2f", b / e }')"
done
