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

log=$OUTBOXD_SCRATCH/outboxd.log
build/daemon/outboxd check-config -c "$config"
/usr/bin/python3 scripts/demo_consumer.py "$OUTBOXD_TEST_RABBITMQ_URL" "$OUTBOXD_TEST_RABBITMQ_USER" \
  "$OUTBOXD_TEST_RABBITMQ_PASSWORD" 4 demo.orders demo.payments &
consumer=$!
build/daemon/outboxd run -c "$config" >"$log" 2>&1 &
daemon=$!
sleep 1

echo "demo: a workflow that arms a payment timeout 3 s ahead, and one that arms and then clears it"
psql -Xq -d "$database" <<'SQL'
BEGIN;
SELECT workflow.start('order-42', 'order', 'AwaitingPayment', correlation_id => 'conv-42',
                      originating_message_id => 'orders:order-placed:42');
SELECT workflow.set_timeout('order-42', 'order-42:payment-timeout:1', now() + interval '3 seconds',
                            'demo.payments', convert_to('{"order": 42}', 'UTF8'), subject => 'PaymentTimeout',
                            headers => jsonb_build_object('due_epoch', extract(epoch FROM now() + interval '3 seconds')));
COMMIT;
BEGIN;
SELECT workflow.start('order-43', 'order', 'AwaitingPayment', correlation_id => 'conv-43');
SELECT workflow.set_timeout('order-43', 'order-43:payment-timeout:1', now() + interval '2 seconds',
                            'demo.payments', convert_to('{"order": 43}', 'UTF8'));
SELECT workflow.save('order-43', 1, 'Paid');
SELECT workflow.clear_timeout('order-43');   -- paid in time: the timeout is cancelled, never published
COMMIT;
SQL

echo "demo: 2,000 order events over 100 sessions, one transaction per 20 rows, plus 3 scheduled reminders"
psql -Xq -d "$database" <<'SQL'
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

for _ in $(seq 1 12); do
  build/daemon/outboxd status -c "$config" | tail -n 1
  sleep 0.5
  if [[ $(psql -XAt -d "$database" -c "SELECT count(*) FROM outbox.messages WHERE status = 'pending'") == 0 ]]; then
    break
  fi
done
build/daemon/outboxd status -c "$config"
kill -TERM "$daemon"
wait "$daemon"
echo "demo: daemon log"
sed 's/^/  | /' "$log"
wait "$consumer"
echo "demo: rows left: $(psql -XAt -d "$database" -c "SELECT status || ' ' || count(*) FROM outbox.messages GROUP BY status" | tr '\n' ' ')"
