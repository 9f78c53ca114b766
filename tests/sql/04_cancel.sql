-- outbox.cancel(): only a pending row that is not yet due is cancelled.
BEGIN;
SET search_path = public;
SELECT plan(16);

SELECT outbox.enqueue('timeouts', 'future-1', 'x', due_at => clock_timestamp() + interval '1 hour') AS future_id \gset
SELECT is(outbox.cancel('future-1'), true, 'a pending row due in the future: true');
SELECT results_eq($$SELECT status, cancelled_at IS NOT NULL FROM outbox.messages WHERE message_id = 'future-1'$$,
  $$VALUES ('cancelled', true)$$, '... the row is cancelled with cancelled_at');
SELECT is(outbox.cancel('future-1'), false, 'cancelling it again: false');
SELECT is(outbox.enqueue('timeouts', 'future-1', 'x'), :future_id::bigint,
  'the cancelled id stays used: enqueueing it again returns the cancelled row');
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'future-1'), 'cancelled', '... which stays cancelled');

SELECT outbox.enqueue('timeouts', 'sent-1', 'x', due_at => clock_timestamp() + interval '1 hour') AS sent_id \gset
UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() WHERE id = :sent_id;
SELECT is(outbox.cancel('sent-1'), false, 'a dispatched row: false');
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'sent-1'), 'dispatched', '... and it stays dispatched');

SELECT outbox.enqueue('timeouts', 'parked-1', 'x', due_at => clock_timestamp() + interval '1 hour') AS parked_id \gset
UPDATE outbox.messages SET status = 'parked', last_error = 'rejected' WHERE id = :parked_id;
SELECT is(outbox.cancel('parked-1'), false, 'a parked row: false');

SELECT is(outbox.cancel('no-such-message'), false, 'an unknown message_id: false');
SELECT is(outbox.cancel(NULL), false, 'NULL: false');

SELECT outbox.enqueue('orders', 'immediate-1', 'x') AS immediate_id \gset
SELECT is(outbox.cancel('immediate-1'), false, 'an immediate row (due at once): false');
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'immediate-1'), 'pending', '... and it stays pending');

-- Due while this transaction runs: now() is still before due_at, the clock is not.
SELECT outbox.enqueue('timeouts', 'soon-1', 'x', due_at => clock_timestamp() + interval '50 milliseconds') AS soon_id,
       pg_sleep(0.1) AS slept \gset
SELECT ok((SELECT due_at > now() FROM outbox.messages WHERE message_id = 'soon-1'),
  'a row due after the transaction started ...');
SELECT is(outbox.cancel('soon-1'), false, '... but due by the clock: false (it may be in flight)');
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'soon-1'), 'pending', '... and it stays pending');

SELECT is((SELECT count(*) FROM outbox.messages WHERE status = 'cancelled'), 1::bigint, 'exactly one row was cancelled');

SELECT * FROM finish();
ROLLBACK;
