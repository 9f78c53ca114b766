-- Real concurrency through dblink: optimistic saves, duplicate deliveries, racing enqueues, cancel against a claim.
--
-- Connections a and b are two application connections; each step commits for
-- real, in this test's own database. A statement that must wait for the other
-- connection is sent asynchronously, and the test checks that it is blocked
-- before letting the other connection commit.
BEGIN;
SET search_path = public;
SELECT plan(34);

SELECT is(dblink_connect('a', sqltest.conninfo()), 'OK', 'connection a connected');
SELECT is(dblink_connect('b', sqltest.conninfo()), 'OK', 'connection b connected');
SELECT pid AS b_pid FROM dblink('b', 'SELECT pg_backend_pid()') AS t(pid int) \gset

-- Runs command on conn; the result is discarded.
CREATE FUNCTION pg_temp.run(conn text, command text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM * FROM dblink(conn, command) AS t(r text);
END $$;
-- After the result of an asynchronous query, clears the connection for the next one.
CREATE FUNCTION pg_temp.drain(conn text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM * FROM dblink_get_result(conn, false) AS t(r text);
END $$;
-- Sends command on conn without waiting, and reports whether it is blocked by a lock.
CREATE FUNCTION pg_temp.send_blocked(conn text, command text, pid int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM dblink_send_query(conn, command);
  RETURN sqltest.wait_until_blocked(pid);
END $$;

SELECT pg_temp.run('a', $$SELECT workflow.start('order-1', 'order-fulfilment', 'AwaitingPayment')$$) AS r \gset

-- Two transitions from the same version: one wins, the other gets 40001.
SELECT pg_temp.run('a', 'BEGIN') AS r \gset
SELECT is((SELECT v FROM dblink('a', $$SELECT workflow.save('order-1', 1, 'Paid')$$) AS t(v bigint)), 2::bigint,
  'a: save from version 1');
SELECT pg_temp.run('b', 'BEGIN') AS r \gset
SELECT ok(pg_temp.send_blocked('b', $$SELECT workflow.save('order-1', 1, 'Cancelled')$$, :b_pid),
  'b: save from version 1 waits for a');
SELECT pg_temp.run('a', 'COMMIT') AS r \gset
SELECT throws_ok($$SELECT * FROM dblink_get_result('b') AS t(v bigint)$$,
  '40001', NULL, 'a committed: b gets SQLSTATE 40001');
SELECT pg_temp.drain('b') AS r \gset
SELECT pg_temp.run('b', 'ROLLBACK') AS r \gset
SELECT results_eq($$SELECT status, version FROM workflow.instances WHERE id = 'order-1'$$,
  $$VALUES ('Paid', 2::bigint)$$, 'the winner''s state stands');
SELECT is((SELECT v FROM dblink('b', $$SELECT workflow.save('order-1', 2, 'Cancelled')$$) AS t(v bigint)), 3::bigint,
  'b reloads (version 2) and retries: version 3');

-- The same under REPEATABLE READ: the loser fails with 40001 as well.
SELECT pg_temp.run('a', 'BEGIN ISOLATION LEVEL REPEATABLE READ') AS r \gset
SELECT pg_temp.run('b', 'BEGIN ISOLATION LEVEL REPEATABLE READ') AS r \gset
SELECT is((SELECT v FROM dblink('b', 'SELECT version FROM workflow.instances WHERE id = ''order-1''') AS t(v bigint)), 3::bigint,
  'b (repeatable read) reads version 3');
SELECT is((SELECT v FROM dblink('a', $$SELECT workflow.save('order-1', 3, 'Refunding')$$) AS t(v bigint)), 4::bigint,
  'a (repeatable read) saves from version 3');
SELECT ok(pg_temp.send_blocked('b', $$SELECT workflow.save('order-1', 3, 'Shipped')$$, :b_pid),
  'b saves from version 3 too and waits');
SELECT pg_temp.run('a', 'COMMIT') AS r \gset
SELECT throws_ok($$SELECT * FROM dblink_get_result('b') AS t(v bigint)$$, '40001', NULL,
  'repeatable read: b gets SQLSTATE 40001');
SELECT pg_temp.drain('b') AS r \gset
SELECT pg_temp.run('b', 'ROLLBACK') AS r \gset

-- A duplicate delivery processed concurrently: only one sees it as new.
SELECT pg_temp.run('a', 'BEGIN') AS r \gset
SELECT is((SELECT v FROM dblink('a', $$SELECT workflow.record_processed('order-1', 'payments:captured:1')$$) AS t(v boolean)),
  true, 'a: record_processed of a new message id');
SELECT pg_temp.run('b', 'BEGIN') AS r \gset
SELECT ok(pg_temp.send_blocked('b', $$SELECT workflow.record_processed('order-1', 'payments:captured:1')$$, :b_pid),
  'b: the same message id waits for a');
SELECT pg_temp.run('a', 'COMMIT') AS r \gset
SELECT is((SELECT v FROM dblink_get_result('b') AS t(v boolean)), false, 'a committed: b sees a duplicate');
SELECT pg_temp.drain('b') AS r \gset
SELECT pg_temp.run('b', 'COMMIT') AS r \gset

-- Starting the same workflow twice at once.
SELECT pg_temp.run('a', 'BEGIN') AS r \gset
SELECT is((SELECT v FROM dblink('a', $$SELECT workflow.start('order-2', 'k', 'New')$$) AS t(v boolean)), true, 'a: start');
SELECT ok(pg_temp.send_blocked('b', $$SELECT workflow.start('order-2', 'k', 'New')$$, :b_pid), 'b: the same start waits');
SELECT pg_temp.run('a', 'COMMIT') AS r \gset
SELECT is((SELECT v FROM dblink_get_result('b') AS t(v boolean)), false, 'b: already started');
SELECT pg_temp.drain('b') AS r \gset

-- Racing enqueues of one message id.
SELECT pg_temp.run('a', 'BEGIN') AS r \gset
SELECT v AS race_id FROM dblink('a', $$SELECT outbox.enqueue('orders', 'race-1', 'x')$$) AS t(v bigint) \gset
SELECT ok(pg_temp.send_blocked('b', $$SELECT outbox.enqueue('orders', 'race-1', 'x')$$, :b_pid),
  'b: enqueue of the same message id waits for a');
SELECT pg_temp.run('a', 'COMMIT') AS r \gset
SELECT is((SELECT v FROM dblink_get_result('b') AS t(v bigint)), :race_id::bigint, 'b: same content, the same id');
SELECT pg_temp.drain('b') AS r \gset
SELECT pg_temp.run('a', 'BEGIN') AS r \gset
SELECT pg_temp.run('a', $$SELECT outbox.enqueue('orders', 'race-2', 'x')$$) AS r \gset
SELECT ok(pg_temp.send_blocked('b', $$SELECT outbox.enqueue('orders', 'race-2', 'y')$$, :b_pid),
  'b: enqueue of the same id with other content waits for a');
SELECT pg_temp.run('a', 'COMMIT') AS r \gset
SELECT throws_ok($$SELECT * FROM dblink_get_result('b') AS t(v bigint)$$, '23505', NULL, 'b: different content, 23505');
SELECT pg_temp.drain('b') AS r \gset
SELECT pg_temp.run('a', 'BEGIN') AS r \gset
SELECT pg_temp.run('a', $$SELECT outbox.enqueue('orders', 'race-3', 'x')$$) AS r \gset
SELECT ok(pg_temp.send_blocked('b', $$SELECT outbox.enqueue('orders', 'race-3', 'x')$$, :b_pid), 'b waits for a third time');
SELECT pg_temp.run('a', 'ROLLBACK') AS r \gset
SELECT isnt((SELECT v FROM dblink_get_result('b') AS t(v bigint)), NULL, 'a rolled back: b inserts the row');
SELECT pg_temp.drain('b') AS r \gset

-- cancel() against the claim of scheduled rows. The claim holds the row lock
-- (FOR UPDATE SKIP LOCKED) while the row falls due; the cancel waits, and must
-- then see that the row is due instead of cancelling a row that is in flight.
SELECT pg_temp.run('a', $$SELECT outbox.enqueue('timeouts', 'race-timeout-1', 'x',
                                                  due_at => clock_timestamp() + interval '300 milliseconds')$$) AS r \gset
SELECT pg_temp.run('a', 'BEGIN') AS r \gset
SELECT is((SELECT v FROM dblink('a', $$SELECT message_id FROM outbox.messages
                                       WHERE message_id = 'race-timeout-1' AND status = 'pending'
                                       FOR UPDATE SKIP LOCKED$$) AS t(v text)), 'race-timeout-1',
  'a (the claim) locks the scheduled row');
SELECT ok(pg_temp.send_blocked('b', $$SELECT outbox.cancel('race-timeout-1')$$, :b_pid),
  'b: cancel while it is not yet due waits for the claim');
SELECT pg_sleep(0.4) AS slept \gset
SELECT pg_temp.run('a', 'COMMIT') AS r \gset
SELECT is((SELECT v FROM dblink_get_result('b') AS t(v boolean)), false,
  'the row fell due meanwhile: cancel returns false ...');
SELECT pg_temp.drain('b') AS r \gset
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'race-timeout-1'), 'pending',
  '... and leaves the claimed row alone');

-- set_partition_count() while writers write: they wait for it to commit, then hash with the new count.
SELECT pg_temp.run('a', 'BEGIN') AS r \gset
SELECT pg_temp.run('a', 'SELECT outbox.set_partition_count(5)') AS r \gset
SELECT ok(pg_temp.send_blocked('b', $$SELECT outbox.enqueue('orders', 'during-rehash', 'x', session_id => 'acct-5')$$,
                                :b_pid), 'b: an enqueue during set_partition_count waits for it');
SELECT pg_temp.run('a', 'COMMIT') AS r \gset
-- The enqueue's result, then the end of b's results: b is free again.
SELECT pg_temp.drain('b') AS r \gset
SELECT pg_temp.drain('b') AS r \gset
SELECT is((SELECT partition FROM outbox.messages WHERE message_id = 'during-rehash'), sqltest.partition_of('acct-5', 5),
  '... and its row hashes with the new count');

-- The payment against its deadline: two transitions that both touch the timeout.
-- Each first records its message (record_processed, whose foreign key share-locks
-- the state record). clear_timeout() must not wait for that lock, or the two would
-- deadlock (40P01) instead of one of them losing with 40001.
SELECT pg_temp.run('a', $$SELECT workflow.start('order-3', 'k', 'AwaitingPayment')$$) AS r \gset
SELECT pg_temp.run('a', $$SELECT workflow.set_timeout('order-3', 'order-3:timeout:1', now() + interval '1 hour',
                                                       'timeouts', 'x')$$) AS r \gset
SELECT pg_temp.run('a', 'BEGIN') AS r \gset
SELECT pg_temp.run('b', 'BEGIN') AS r \gset
SELECT pg_temp.run('a', $$SELECT workflow.record_processed('order-3', 'payments:captured:3')$$) AS r \gset
SELECT pg_temp.run('b', $$SELECT workflow.record_processed('order-3', 'order-3:timeout:1')$$) AS r \gset
SELECT pg_temp.run('a', $$SET LOCAL lock_timeout = '2s'$$) AS r \gset
SELECT lives_ok($$SELECT * FROM dblink('a', 'SELECT workflow.clear_timeout(''order-3'')') AS t(v boolean)$$,
  'a: clear_timeout does not wait for b''s record_processed');
SELECT ok(pg_temp.send_blocked('b', $$SELECT workflow.clear_timeout('order-3')$$, :b_pid),
  'b: clear_timeout waits for a');
SELECT pg_temp.run('a', $$SELECT workflow.save('order-3', 1, 'Paid')$$) AS r \gset
SELECT pg_temp.run('a', 'COMMIT') AS r \gset
SELECT is((SELECT v FROM dblink_get_result('b') AS t(v boolean)), false, 'a committed: b finds no timeout to clear');
SELECT pg_temp.drain('b') AS r \gset
SELECT throws_ok($$SELECT * FROM dblink('b', 'SELECT workflow.save(''order-3'', 1, ''Cancelled'')') AS t(v bigint)$$,
  '40001', NULL, '... and its save gets 40001, not a deadlock');
SELECT pg_temp.run('b', 'ROLLBACK') AS r \gset
SELECT is((SELECT status FROM workflow.instances WHERE id = 'order-3'), 'Paid', 'the payment won');

SELECT dblink_disconnect('a') AS da, dblink_disconnect('b') AS db \gset

SELECT * FROM finish();
ROLLBACK;
