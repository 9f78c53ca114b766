-- outbox.reschedule(): earlier, later and now; what is too late or not the caller's; against the claim; the wake-up; set_timeout() again.
SELECT sqltest.writer_login('app_a');
SELECT sqltest.writer_login('app_b');

BEGIN;
SET search_path = public;
SELECT plan(35);

-- Earlier, later, now ------------------------------------------------------------

SELECT outbox.enqueue('timeouts', 'r-1', 'x', session_id => 's', due_at => now() + interval '1 hour') AS r1 \gset
SELECT is(outbox.reschedule('r-1', now() + interval '10 minutes'), true, 'earlier: true');
SELECT is((SELECT due_at FROM outbox.messages WHERE message_id = 'r-1'), now() + interval '10 minutes', '... moved');
SELECT is(outbox.reschedule('r-1', now() + interval '2 hours'), true, 'later: true');
SELECT is((SELECT due_at FROM outbox.messages WHERE message_id = 'r-1'), now() + interval '2 hours', '... moved');
SELECT is(outbox.reschedule('r-1', now() + interval '2 hours'), true, 'to the same time: true (nothing to change)');
SELECT is(outbox.reschedule('r-1', now()), true, 'now(): true');
SELECT results_eq($$SELECT id, due_at, status, session_id FROM outbox.messages WHERE message_id = 'r-1'$$,
  format($$VALUES (%s::bigint, now(), 'pending', 's')$$, :r1),
  '... due now, same row id and session: its place in the session''s order is unchanged');
SELECT is(outbox.reschedule('r-1', now() + interval '1 hour'), false,
  'once due by the clock it stays due: false (it may be in flight)');

SELECT outbox.enqueue('timeouts', 'r-2', 'x', due_at => now() + interval '1 hour') AS r2 \gset
SELECT is(outbox.reschedule('r-2', now() - interval '1 day'), true, 'a time in the past: true, due at once');

-- Too late, not found, invalid ---------------------------------------------------

SELECT outbox.enqueue('timeouts', 'r-3', 'x', due_at => now() + interval '1 hour') AS r3 \gset
UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() WHERE id = :r3;
SELECT is(outbox.reschedule('r-3', now() + interval '2 hours'), false, 'dispatched: false');
SELECT outbox.enqueue('timeouts', 'r-4', 'x', due_at => now() + interval '1 hour') AS r4 \gset
SELECT ok(outbox.cancel('r-4'), 'cancelled ...');
SELECT is(outbox.reschedule('r-4', now()), false, '... cannot be rescheduled: false');
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'r-4'), 'cancelled', '... and stays cancelled');
SELECT outbox.enqueue('timeouts', 'r-5', 'x', due_at => now() + interval '1 hour') AS r5 \gset
UPDATE outbox.messages SET status = 'parked' WHERE id = :r5;
SELECT is(outbox.reschedule('r-5', now()), false, 'parked: false');
SELECT outbox.enqueue('orders', 'r-6', 'x') AS r6 \gset
SELECT is(outbox.reschedule('r-6', now() + interval '1 hour'), false, 'an immediate row (due at once): false');
SELECT is(outbox.reschedule('no-such-id', now()), NULL, 'an unknown id: NULL');
SELECT throws_ok($$SELECT outbox.reschedule('r-2', NULL)$$, '22023', 'due_at must be finite', 'NULL due_at: 22023');
SELECT throws_ok($$SELECT outbox.reschedule('r-2', 'infinity')$$, '22023', 'due_at must be finite', 'infinite due_at: 22023');

SELECT outbox.enqueue('timeouts', 'soon-1', 'x', due_at => clock_timestamp() + interval '50 milliseconds') AS soon,
       pg_sleep(0.1) AS slept \gset
SELECT is(outbox.reschedule('soon-1', now() + interval '1 hour'), false,
  'due by the clock although not by now(): false');

-- Another writer's rows -----------------------------------------------------------

SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('timeouts', 'a-t1', 'x', due_at => now() + interval '1 hour')$$),
  'ok', 'app_a schedules a timeout');
SELECT is(sqltest.ask_login('app_b', $$SELECT coalesce(outbox.reschedule('a-t1', now())::text, 'NULL')$$), 'NULL',
  'app_b cannot reschedule it: NULL, as for an unknown id');
SELECT ok((SELECT due_at > now() + interval '50 minutes' FROM outbox.messages WHERE message_id = 'a-t1'), '... it did not move');
SELECT is(sqltest.ask_login('app_a', $$SELECT outbox.reschedule('a-t1', now() + interval '5 minutes')::text$$), 'true',
  'app_a can');
SELECT is(sqltest.try_as('outbox_writer', $$SELECT outbox.reschedule('a-t1', now())$$), 'ok', 'writers may call it');
SELECT is(sqltest.try_as('outbox_dispatcher', $$SELECT outbox.reschedule('a-t1', now())$$), '42501', 'the dispatcher may not');

-- Against the claim ----------------------------------------------------------------

SELECT is(dblink_connect('a', sqltest.conninfo()), 'OK', 'connection a (the claim) connected');
SELECT is(dblink_connect('b', sqltest.conninfo()), 'OK', 'connection b (the application) connected');
SELECT pid AS b_pid FROM dblink('b', 'SELECT pg_backend_pid()') AS t(pid int) \gset
SELECT v AS r FROM dblink('a', $$SELECT outbox.enqueue('timeouts', 'race-1', 'x',
                                      due_at => clock_timestamp() + interval '300 milliseconds')$$) AS t(v bigint) \gset
SELECT due_at AS race_due FROM outbox.messages WHERE message_id = 'race-1' \gset
SELECT dblink_exec('a', 'BEGIN') AS r \gset
SELECT is((SELECT v FROM dblink('a', $$SELECT message_id FROM outbox.messages WHERE message_id = 'race-1'
                                       AND status = 'pending' FOR UPDATE SKIP LOCKED$$) AS t(v text)), 'race-1',
  'the claim locks the scheduled row');
SELECT dblink_send_query('b', $$SELECT outbox.reschedule('race-1', now() + interval '1 hour')$$) AS sent \gset
SELECT ok(sqltest.wait_until_blocked(:b_pid), 'a reschedule while it is not yet due waits for the claim');
SELECT pg_sleep(0.4) AS slept \gset
SELECT dblink_exec('a', 'COMMIT') AS r \gset
SELECT is((SELECT v FROM dblink_get_result('b') AS t(v boolean)), false,
  'the row fell due meanwhile: false, and the claimed row keeps its time (sent once, not moved)');
SELECT count(*) AS drained FROM dblink_get_result('b', false) AS t(v boolean) \gset
SELECT is((SELECT due_at FROM outbox.messages WHERE message_id = 'race-1'), :'race_due'::timestamptz, '... not moved');

-- The wake-up -----------------------------------------------------------------------

-- Runs query on conn (committed) and returns its one value as text.
CREATE FUNCTION pg_temp.remote(conn text, query text) RETURNS text LANGUAGE sql AS $$
  SELECT v FROM dblink(conn, query) AS t(v text)
$$;
-- Sends sentinel from b and returns the payloads that reached a before it.
CREATE FUNCTION pg_temp.step(sentinel text) RETURNS text[] LANGUAGE plpgsql AS $$
BEGIN
  PERFORM dblink_exec('b', format('NOTIFY outbox_wakeup, %L', sentinel));
  RETURN sqltest.notifications_until('a', 'outbox_wakeup', sentinel);
END $$;

SELECT dblink_exec('a', 'LISTEN outbox_wakeup') AS r \gset
SELECT dblink_exec('b', $$INSERT INTO outbox.instances (instance_id, idle) VALUES ('idle-1', true)$$) AS r \gset
SELECT pg_temp.remote('b', $$SELECT outbox.enqueue('timeouts', 'w-1', 'x', due_at => now() + interval '1 hour')::text$$) AS r \gset
SELECT pg_temp.step('after-insert') AS r \gset
SELECT pg_temp.remote('b', $$SELECT outbox.reschedule('w-1', now() + interval '2 hours')::text$$) AS r \gset
SELECT is(pg_temp.step('after-later'), '{""}'::text[], 'moved later while an instance is idle: one NOTIFY (017)');
SELECT pg_temp.remote('b', $$SELECT outbox.reschedule('w-1', now() + interval '1 second')::text$$) AS r \gset
SELECT is(pg_temp.step('after-earlier'), '{""}'::text[], 'moved earlier while an instance is idle: one NOTIFY');
SELECT dblink_disconnect('a') AS da, dblink_disconnect('b') AS db \gset

-- workflow.set_timeout() with the same id moves the row -------------------------------

SELECT workflow.start('wf-1', 'order', 'New') AS started \gset
SELECT workflow.set_timeout('wf-1', 'wf-1:timeout:1', now() + interval '1 day', 'timeouts', 'late') AS t1 \gset
SELECT is(workflow.set_timeout('wf-1', 'wf-1:timeout:1', now() + interval '1 hour', 'timeouts', 'late'), :t1::bigint,
  'set_timeout again with another due time: the same row');
SELECT results_eq($$SELECT m.due_at, i.timeout_due_at FROM outbox.messages m, workflow.instances i
                     WHERE m.message_id = 'wf-1:timeout:1' AND i.id = 'wf-1'$$,
  $$VALUES (now() + interval '1 hour', now() + interval '1 hour')$$, '... moved, and the state records the new time');

SELECT * FROM finish();
ROLLBACK;
