#!/usr/bin/env bash
# Demo on a fresh Debian 12 machine: an application writes to the outbox, outboxd publishes it to RabbitMQ.
#
# Usage: scripts/demo.sh
# Installs only the packages it runs (scripts/setup.sh --demo), builds only the daemon (Release,
# build-release/) and starts a new PostgreSQL and RabbitMQ in .scratch/demo (the previous run's
# are removed first), stopped on exit (OUTBOXD_DEMO_KEEP=1 leaves them running).
# Exit status 0 when every message arrived as it should.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
root=$PWD
outboxd=$root/build-release/daemon/outboxd
t0=$EPOCHREALTIME

say() { printf '\n== %s\n' "$*"; }
# Seconds since $1 (an $EPOCHREALTIME value), to a tenth.
elapsed() {
  local us=$((${EPOCHREALTIME/./} - ${1/./}))
  printf '%d.%d s' $((us / 1000000)) $((us / 100000 % 10))
}

say "build: the demo's packages, outboxd alone (Release)"
scripts/setup.sh --demo --target outboxd
echo "  ready in $(elapsed "$t0")"

say "services: PostgreSQL 15 and RabbitMQ (AMQP 1.0) on free ports"
export OUTBOXD_SCRATCH=$root/.scratch/demo
scripts/services.sh clean >/dev/null
daemon='' consumer=''
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  for pid in $daemon $consumer; do kill "$pid" 2>/dev/null || true; done
  [[ ${OUTBOXD_DEMO_KEEP:-0} == 1 ]] || "$root/scripts/services.sh" stop >/dev/null
}
trap cleanup EXIT
OUTBOXD_SERVICES="pg rabbitmq" scripts/services.sh start
# shellcheck source=/dev/null
source "$OUTBOXD_SCRATCH/services.env"

database=outboxd_demo
daemon_role=outboxd_demo_daemon
writer_role=outboxd_demo_app
# As the superuser unless -U says otherwise (PGUSER, from services.env); values only, no tables.
run_sql() { psql -qAtX -v ON_ERROR_STOP=1 "$@"; }
count() { run_sql -d "$database" -c "SELECT count(*) FROM outbox.messages WHERE $1"; }

http_port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
config=$OUTBOXD_SCRATCH/demo.yaml
cat >"$config" <<EOF
# Written by scripts/demo.sh for the services in $OUTBOXD_SCRATCH.
# The daemon's role holds outbox_dispatcher only; \`outboxd migrate\` runs with
# OUTBOXD_DEMO_DATABASE_URL set to the superuser's URL.
database:
  url: \${OUTBOXD_DEMO_DATABASE_URL:-postgresql://$daemon_role@127.0.0.1:$PGPORT/$database}
broker:
  url: $OUTBOXD_TEST_RABBITMQ_URL
  profile: rabbitmq
  username: $OUTBOXD_TEST_RABBITMQ_USER
  password: $OUTBOXD_TEST_RABBITMQ_PASSWORD
http:
  listen: 127.0.0.1:$http_port
EOF

say "schema and roles: the superuser migrates and creates two login roles, nothing else"
run_sql -c "CREATE DATABASE $database"
OUTBOXD_DEMO_DATABASE_URL=postgresql://postgres@127.0.0.1:$PGPORT/$database "$outboxd" migrate -c "$config" |
  tail -n 1 | sed 's/^/  /'
run_sql -c "CREATE ROLE $daemon_role LOGIN IN ROLE outbox_dispatcher" \
  -c "CREATE ROLE $writer_role LOGIN IN ROLE outbox_writer"
for role in "$daemon_role" "$writer_role"; do
  run_sql -c "SELECT format('  %s: member of %s only, %s', r.rolname, string_agg(g.rolname, ', '),
                            CASE WHEN r.rolsuper OR r.rolcreaterole THEN 'SUPERUSER or CREATEROLE'
                                 ELSE 'neither superuser nor CREATEROLE' END)
                FROM pg_roles r JOIN pg_auth_members m ON m.member = r.oid JOIN pg_roles g ON g.oid = m.roleid
               WHERE r.rolname = '$role' GROUP BY r.rolname, r.rolsuper, r.rolcreaterole"
done

# The consumer attaches before anything is written, so arrival times are true.
consumer_out=$OUTBOXD_SCRATCH/consumer.out
/usr/bin/python3 scripts/demo_consumer.py "$OUTBOXD_TEST_RABBITMQ_URL" "$OUTBOXD_TEST_RABBITMQ_USER" \
  "$OUTBOXD_TEST_RABBITMQ_PASSWORD" 2004 --absent order-43:payment-timeout:1 demo.orders demo.payments \
  >"$consumer_out" 2>&1 &
consumer=$!
log=$OUTBOXD_SCRATCH/outboxd.log
"$outboxd" run -c "$config" >"$log" 2>&1 &
daemon=$!
fail() {
  printf 'demo: FAILED: %s\n--- end of %s ---\n' "$1" "$log" >&2
  tail -n 20 "$log" >&2
  exit 1
}
# Polls a condition every 50 ms while the daemon lives, for at most $1 seconds.
wait_for() {
  local limit=$1 i
  shift
  for ((i = 0; i < limit * 20; i++)); do
    "$@" && return 0
    kill -0 "$daemon" 2>/dev/null || fail "outboxd exited"
    sleep 0.05
  done
  fail "no $* after $limit s"
}
problems='^[^ ]+ (warning|error|critical) '
started() { grep -q '^consumer: ready' "$consumer_out" && grep -q 'broker connected' "$log"; }
none_pending() { [[ $(count "status = 'pending' $1") == 0 ]]; }
wait_for 30 started

say "write: the application ($writer_role) commits, in plain SQL"
written=$EPOCHREALTIME
# Result values (row ids, booleans) are not shown; errors are.
run_sql -U "$writer_role" -d "$database" >/dev/null <<'SQL'
-- Two workflows arm a payment timeout; order-43 is paid at once and clears it in the same transaction.
BEGIN;
SELECT workflow.start('order-42', 'order', 'AwaitingPayment', correlation_id => 'conv-42');
SELECT workflow.set_timeout('order-42', 'order-42:payment-timeout:1', now() + interval '3 seconds',
                            'demo.payments', convert_to('{"order": 42}', 'UTF8'), subject => 'PaymentTimeout',
                            headers => jsonb_build_object('due_epoch', extract(epoch FROM now() + interval '3 seconds')));
COMMIT;
BEGIN;
SELECT workflow.start('order-43', 'order', 'AwaitingPayment', correlation_id => 'conv-43');
SELECT workflow.set_timeout('order-43', 'order-43:payment-timeout:1', now() + interval '2 seconds',
                            'demo.payments', convert_to('{"order": 43}', 'UTF8'));
SELECT workflow.save('order-43', 1, 'Paid');
SELECT workflow.clear_timeout('order-43');
COMMIT;
-- 2,000 order events in 100 sessions, 20 rows per transaction, then 3 reminders due in 2, 3 and 4 s.
DO $$
BEGIN
  FOR batch IN 0..99 LOOP
    PERFORM outbox.enqueue(destination => 'demo.orders', message_id => 'evt-' || i,
                           session_id => 'order-' || (i % 100), subject => 'OrderEvent',
                           body => jsonb_build_object('event', i),
                           headers => jsonb_build_object('seq', i / 100))
      FROM generate_series(batch * 20, batch * 20 + 19) AS i;
    COMMIT;
  END LOOP;
END $$;
SELECT outbox.enqueue(destination => 'demo.orders', message_id => 'reminder-' || s,
                      body => 'reminder'::text, due_at => now() + s * interval '1 second',
                      headers => jsonb_build_object('due_epoch', extract(epoch FROM now() + s * interval '1 second')))
  FROM generate_series(2, 4) AS s;
SQL
echo "  2,005 rows in $(elapsed "$written"): 2,000 order events in 100 sessions (in order within each),"
echo "  4 scheduled (a payment timeout due in 3 s, reminders due in 2, 3, 4 s), 1 timeout cancelled"

say "outboxd: publishes as $daemon_role, marks each row once RabbitMQ accepted it"
wait_for 60 none_pending "AND due_at <= created_at"
echo "  immediate rows: all 2,000 published and marked $(elapsed "$written") after the first commit"
wait_for 60 none_pending ""
echo "  scheduled rows: each published when due, the last $(elapsed "$written") after the first commit"
metrics=$(curl -fsS "http://127.0.0.1:$http_port/metrics")
wait "$consumer" && arrived_ok=1 || arrived_ok=0
kill -TERM "$daemon"
wait "$daemon" && echo "  SIGTERM: $(grep -o 'outboxd stopped.*' "$log")" || echo "  outboxd FAILED; log: $log"
if grep -qE "$problems" "$log"; then
  echo "  warnings in its log:"
  grep -E "$problems" "$log" | sed 's/^/    /'
fi
echo "  in the database: $(count "status = 'cancelled'") cancelled row kept for the retention purge, nothing pending"

say "RabbitMQ: what a consumer received"
grep -v '^consumer: ready' "$consumer_out"

trap - EXIT
daemon='' consumer=''  # both have exited and were waited for
cleanup

say "next"
echo "  build-release/daemon/outboxd status -c ${config#"$root"/}    (OUTBOXD_DEMO_KEEP=1 keeps the services)"
echo "  metrics: http://127.0.0.1:$http_port/metrics while it ran, e.g."
grep -E '^outboxd_(rows_dispatched_total|outcomes_total\{outcome="accepted"\}) ' <<<"$metrics" | sed 's/^/    /'
echo "  docs: README.md, docs/sql.md (writing rows, workflows), docs/metrics.md, config/outboxd.yaml"
echo "  daemon log: ${log#"$root"/}"
echo "demo: $( ((arrived_ok)) && echo ok || echo FAILED) in $(elapsed "$t0")"
((arrived_ok))
