-- Wake-up NOTIFY on <schema>_wakeup: sent at commit, only while an instance is idle, on insert and on requeue.
--
-- Notifications reach listeners only after commit, so the statements under test
-- run and commit on dblink connections, and a dblink listener collects what
-- arrives. After each step the acting connection sends a sentinel; everything
-- before it in the listener's queue was caused by that step.
BEGIN;
SET search_path = public;
SELECT plan(20);

SELECT is(dblink_connect('listener', sqltest.conninfo()), 'OK', 'listener connected');
SELECT is(dblink_connect('app', sqltest.conninfo()), 'OK', 'application connected');
SELECT is(dblink_connect('ops', sqltest.conninfo()), 'OK', 'operator connected');
SELECT dblink_exec('listener', 'LISTEN outbox_wakeup') AS listening,
       dblink_exec('app', 'SET ROLE outbox_writer') AS app_role \gset

-- Runs command (and commits it) on connection conn.
CREATE FUNCTION pg_temp.remote(conn text, command text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM * FROM dblink(conn, command) AS t(r text);
END $$;

-- Sends sentinel from conn and returns the payloads that arrived before it.
CREATE FUNCTION pg_temp.step(conn text, sentinel text) RETURNS text[] LANGUAGE plpgsql AS $$
BEGIN
  PERFORM dblink_exec(conn, format('NOTIFY outbox_wakeup, %L', sentinel));
  RETURN sqltest.notifications_until('listener', 'outbox_wakeup', sentinel);
END $$;

-- No instance at all, then only a busy one: no NOTIFY.
SELECT pg_temp.remote('app', $$SELECT outbox.enqueue('orders', 'n-1', 'x')$$) AS r \gset
SELECT is(pg_temp.step('app', 's1'), '{}'::text[], 'no instance registered: insert does not notify');
SELECT pg_temp.remote('ops', $$INSERT INTO outbox.instances (instance_id, idle) VALUES ('d-1', false)$$) AS r \gset
SELECT pg_temp.remote('app', $$SELECT outbox.enqueue('orders', 'n-2', 'x')$$) AS r \gset
SELECT is(pg_temp.step('app', 's2'), '{}'::text[], 'only busy instances: insert does not notify');

-- An idle instance: one NOTIFY per committed transaction with inserts.
SELECT pg_temp.remote('ops', $$UPDATE outbox.instances SET idle = true WHERE instance_id = 'd-1'$$) AS r \gset
SELECT pg_temp.remote('app', $$SELECT outbox.enqueue('orders', 'n-3', 'x')$$) AS r \gset
SELECT is(pg_temp.step('app', 's3'), '{""}'::text[], 'an idle instance: enqueue notifies once, empty payload');
SELECT pg_temp.remote('app', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('n-4', 'orders')$$) AS r \gset
SELECT is(pg_temp.step('app', 's4'), '{""}'::text[], 'plain INSERT by the writer notifies (security definer check of instances)');
SELECT pg_temp.remote('app', $$INSERT INTO outbox.messages (message_id, destination)
                            SELECT 'n-5-' || i, 'orders' FROM generate_series(1, 50) i$$) AS r \gset
SELECT is(pg_temp.step('app', 's5'), '{""}'::text[], 'a 50-row insert notifies once (PostgreSQL folds the notifications of its rows)');
SELECT pg_temp.remote('app', $$BEGIN; SELECT outbox.enqueue('orders', 'n-6', 'x'); SELECT outbox.enqueue('orders', 'n-7', 'x'); COMMIT$$) AS r \gset
SELECT is(pg_temp.step('app', 's6'), '{""}'::text[], 'two inserts in one transaction: one notification');
SELECT pg_temp.remote('app', $$BEGIN; SELECT outbox.enqueue('orders', 'n-8', 'x'); ROLLBACK$$) AS r \gset
SELECT is(pg_temp.step('app', 's7'), '{}'::text[], 'a rolled-back insert does not notify');
SELECT pg_temp.remote('app', $$SELECT outbox.enqueue('timeouts', 'n-9', 'x', due_at => now() + interval '1 hour')$$) AS r \gset
SELECT is(pg_temp.step('app', 's8'), '{""}'::text[], 'a scheduled row notifies too (the sleeper recomputes its deadline)');

-- Updates: only a change of status to pending (requeue) notifies.
SELECT pg_temp.remote('ops', $$UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() WHERE message_id = 'n-1'$$) AS r \gset
SELECT is(pg_temp.step('ops', 's9'), '{}'::text[], 'marking dispatched does not notify');
SELECT pg_temp.remote('ops', $$UPDATE outbox.messages SET attempts = 1, next_attempt_at = now() + interval '1 s',
                                   last_error = 'rejected' WHERE message_id = 'n-2'$$) AS r \gset
SELECT is(pg_temp.step('ops', 's10'), '{}'::text[], 'backing off does not notify');
SELECT pg_temp.remote('ops', $$UPDATE outbox.messages SET status = 'parked' WHERE message_id IN ('n-2', 'n-3')$$) AS r \gset
SELECT is(pg_temp.step('ops', 's11'), '{}'::text[], 'parking does not notify');
SELECT pg_temp.remote('ops', $$SET ROLE outbox_dispatcher;
                            SELECT count(*) FROM outbox.requeue_parked(NULL, all_parked => true); RESET ROLE$$) AS r \gset
SELECT is(pg_temp.step('ops', 's12'), '{""}'::text[], 'requeueing parked rows notifies once');

-- Idle no more.
SELECT pg_temp.remote('ops', $$UPDATE outbox.instances SET idle = false$$) AS r \gset
SELECT pg_temp.remote('app', $$SELECT outbox.enqueue('orders', 'n-10', 'x')$$) AS r \gset
SELECT is(pg_temp.step('app', 's13'), '{}'::text[], 'after the instance woke up: no NOTIFY');
SELECT pg_temp.remote('ops', $$UPDATE outbox.messages SET status = 'parked' WHERE message_id = 'n-10';
                            UPDATE outbox.messages SET status = 'pending' WHERE message_id = 'n-10'$$) AS r \gset
SELECT is(pg_temp.step('ops', 's14'), '{}'::text[], '... nor on requeue');

-- The check runs as a security definer; a writer's own instances table cannot fool it.
SELECT pg_temp.remote('app', $$CREATE TEMP TABLE instances (idle boolean); INSERT INTO instances VALUES (true);
                            SET search_path = pg_temp, outbox;
                            INSERT INTO outbox.messages (message_id, destination) VALUES ('n-11', 'orders');
                            RESET search_path$$) AS r \gset
SELECT is(pg_temp.step('app', 's15'), '{}'::text[], 'an idle-looking instances table first on the writer''s search_path: no NOTIFY');

-- write_partition_function(n, false) leaves the check out (to measure its cost); the default puts it back.
SELECT pg_temp.remote('ops', $$UPDATE outbox.instances SET idle = true; SELECT outbox.write_partition_function(64, false)$$) AS r \gset
SELECT pg_temp.remote('app', $$SELECT outbox.enqueue('orders', 'n-12', 'x')$$) AS r \gset
SELECT is(pg_temp.step('app', 's16'), '{}'::text[], 'without the wake-up check: no NOTIFY even with an idle instance');
SELECT pg_temp.remote('ops', $$SELECT outbox.write_partition_function(64)$$) AS r \gset
SELECT pg_temp.remote('app', $$SELECT outbox.enqueue('orders', 'n-13', 'x')$$) AS r \gset
SELECT is(pg_temp.step('app', 's17'), '{""}'::text[], 'write_partition_function(64) puts it back');

SELECT dblink_disconnect('listener') AS d1, dblink_disconnect('app') AS d2, dblink_disconnect('ops') AS d3 \gset

SELECT * FROM finish();
ROLLBACK;
