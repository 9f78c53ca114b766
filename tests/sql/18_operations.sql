-- 014_operations: failure times, the parked event, requeue/skip/replay with their audit rows, purge_row_events(), workflow_states() and the dispatcher's grants.
BEGIN;
SET search_path = public;
SELECT plan(42);

-- Schema ---------------------------------------------------------------------------

SELECT has_column('outbox', 'messages', 'first_failed_at', 'messages.first_failed_at');
SELECT has_column('outbox', 'messages', 'last_failed_at', 'messages.last_failed_at');
SELECT has_table('outbox', 'row_events', 'the audit trail');
SELECT hasnt_index('outbox', 'messages', 'messages_finished_idx', 'the shared purge index is gone ...');
SELECT is(pg_get_indexdef('outbox.messages_dispatched_idx'::regclass),
  'CREATE INDEX messages_dispatched_idx ON outbox.messages USING btree (dispatched_at) WHERE (status = ''dispatched''::text)',
  '... dispatched rows have their own');
SELECT is(pg_get_indexdef('outbox.messages_cancelled_idx'::regclass),
  'CREATE INDEX messages_cancelled_idx ON outbox.messages USING btree (cancelled_at) WHERE (status = ''cancelled''::text)',
  '... and so do cancelled ones');

-- Grants ------------------------------------------------------------------------------

SELECT is(sqltest.try_as('outbox_dispatcher', 'SELECT * FROM outbox.row_events'), 'ok', 'the dispatcher reads the trail ...');
SELECT is(sqltest.try_as('outbox_dispatcher',
  $$INSERT INTO outbox.row_events (row_id, message_id, action) VALUES (1, 'x', 'skipped')$$), '42501', '... but cannot write it');
SELECT is(sqltest.try_as('outbox_dispatcher', 'DELETE FROM outbox.row_events'), '42501', '... nor delete from it');
SELECT is(sqltest.try_as('outbox_dispatcher', $$SELECT outbox.name_os_user('mallory')$$), '42501',
  '... nor call the internal helper');
SELECT is(sqltest.try_as('outbox_writer', $$SELECT outbox.requeue_parked('{x}')$$), '42501', 'writers may not requeue');
SELECT is(sqltest.try_as('outbox_writer', $$SELECT * FROM outbox.replay('{x}', NULL, NULL, NULL, NULL, 10, true)$$),
  '42501', '... nor replay');
SELECT is(sqltest.try_as('outbox_writer', 'SELECT * FROM outbox.row_events'), '42501', '... nor read the trail');
SELECT is(sqltest.try_as('outbox_dispatcher', $$SELECT * FROM outbox.workflow_states('s')$$), 'ok',
  'the dispatcher may ask for a session''s workflow states ...');
SELECT is(sqltest.try_as('outbox_dispatcher', 'SELECT * FROM workflow.instances'), '42501', '... but not read the table');

-- Parking writes an event -------------------------------------------------------------

SELECT outbox.enqueue('orders', 'p-1', 'x', session_id => 's1') AS p1 \gset
SELECT outbox.enqueue('orders', 'p-2', 'x', session_id => 's1') AS p2 \gset
SELECT outbox.enqueue('orders', 'p-3', 'x', session_id => 's2') AS p3 \gset
UPDATE outbox.messages SET attempts = 1, last_error = 'rejected: first', next_attempt_at = now(),
                           first_failed_at = now(), last_failed_at = now() WHERE message_id LIKE 'p-%';
SELECT is_empty('SELECT * FROM outbox.row_events', 'a backoff writes no event');
UPDATE outbox.messages SET status = 'parked', attempts = 5, last_error = 'rejected: amqp:resource-limit-exceeded'
 WHERE message_id IN ('p-1', 'p-3');
SELECT results_eq($$SELECT message_id, action, db_role = session_user, os_user, detail FROM outbox.row_events ORDER BY id$$,
  $$VALUES ('p-1', 'parked', true, NULL::text, 'rejected: amqp:resource-limit-exceeded'),
           ('p-3', 'parked', true, NULL::text, 'rejected: amqp:resource-limit-exceeded')$$,
  'parking a row writes a parked event with the last error and the login role');
UPDATE outbox.messages SET attempts = 6 WHERE message_id = 'p-1';
SELECT is((SELECT count(*) FROM outbox.row_events), 2::bigint, 'a parked row changed again writes no second event');

-- requeue and skip --------------------------------------------------------------------

SELECT is(sqltest.try_as('outbox_dispatcher', $$SELECT outbox.requeue_parked('{p-1}', os_user => 'alice')$$), 'ok',
  'the dispatcher requeues ...');
SELECT results_eq($$SELECT status, attempts, next_attempt_at, first_failed_at, last_failed_at FROM outbox.messages
                     WHERE message_id = 'p-1'$$,
  $$VALUES ('pending', 0, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz)$$,
  '... the row is pending from scratch');
SELECT results_eq($$SELECT action, db_role = session_user, os_user, detail FROM outbox.row_events WHERE message_id = 'p-1' ORDER BY id$$,
  $$VALUES ('parked', true, NULL::text, 'rejected: amqp:resource-limit-exceeded'),
           ('requeued', true, 'alice', 'rejected: amqp:resource-limit-exceeded')$$,
  '... and its trail says who requeued it');
SELECT is(ARRAY(SELECT outbox.requeue_parked('{p-1,p-2}')), '{}'::text[], 'rows that are not parked: nothing');
SELECT is(ARRAY(SELECT outbox.skip_parked(NULL, session_id => 's2', os_user => 'bob')), '{p-3}'::text[],
  'skip by session returns the rows skipped');
SELECT results_eq($$SELECT status, last_error, cancelled_at IS NOT NULL FROM outbox.messages WHERE message_id = 'p-3'$$,
  $$VALUES ('cancelled', 'skipped by operator; last error: rejected: amqp:resource-limit-exceeded', true)$$,
  '... cancelled, and last_error says so');
SELECT is((SELECT os_user FROM outbox.row_events WHERE message_id = 'p-3' AND action = 'skipped'), 'bob',
  '... with a skipped event');
SELECT throws_ok($$SELECT outbox.skip_parked(NULL, NULL, true, E'bad\nname')$$, '22023', NULL,
  'an os_user with a control character is refused');
UPDATE outbox.messages SET status = 'parked' WHERE message_id = 'p-2';
SELECT is(ARRAY(SELECT outbox.skip_parked(NULL, all_parked => true)), '{p-2}'::text[], 'all_parked skips every parked row');

-- replay ------------------------------------------------------------------------------

SELECT outbox.enqueue('orders', 'r-1', 'x', session_id => 'o42') AS r1 \gset
SELECT outbox.enqueue('orders', 'r-2', 'x', session_id => 'o42') AS r2 \gset
SELECT outbox.enqueue('orders', 'r-3', 'x', session_id => 'o42') AS r3 \gset
SELECT outbox.enqueue('billing', 'r-4', 'x', session_id => 'o43') AS r4 \gset
UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() - interval '1 hour', partition = 999
 WHERE message_id IN ('r-1', 'r-2', 'r-4');
SELECT throws_ok($$SELECT * FROM outbox.replay(NULL, NULL, NULL, NULL, NULL, 10, true)$$, '22023', NULL,
  'replay needs a selection');
SELECT results_eq($$SELECT message_id, row_session, matched, waiting_behind
                      FROM outbox.replay(NULL, 'o42', NULL, NULL, NULL, 10, true)$$,
  $$VALUES ('r-1', 'o42', 2::bigint, 1::bigint), ('r-2', 'o42', 2::bigint, 1::bigint)$$,
  'a dry run lists the dispatched rows of the session and the pending row behind them');
SELECT is((SELECT count(*) FROM outbox.messages WHERE status = 'dispatched'), 3::bigint, '... and changes nothing');
SELECT is((SELECT count(*) FROM outbox.row_events WHERE action = 'replayed'), 0::bigint, '... nor writes an event');
SELECT is((SELECT matched FROM outbox.replay(NULL, NULL, 'orders', now() - interval '2 hours', now(), 1, true) LIMIT 1),
  2::bigint, 'a dry run counts every match past the limit');
SELECT throws_ok($$SELECT * FROM outbox.replay(NULL, NULL, 'orders', NULL, NULL, 1, false)$$, '54000', NULL,
  'more rows than the limit: refused');
SELECT is((SELECT count(*) FROM outbox.replay(NULL, NULL, 'orders', now() - interval '10 minutes', NULL, 10, false)),
  0::bigint, 'a window with no dispatch in it replays nothing');
SELECT is(sqltest.try_as('outbox_dispatcher',
  $$SELECT * FROM outbox.replay(NULL, 'o42', NULL, NULL, NULL, 10, false, 'carol')$$), 'ok', 'the dispatcher replays');
SELECT results_eq($$SELECT message_id, status, dispatched_at, attempts, due_at > created_at AND due_at <= now() + interval '1 ms',
                           partition = (hashtext(session_id)::bigint & 2147483647) % 64
                      FROM outbox.messages WHERE session_id = 'o42' ORDER BY id$$,
  $$VALUES ('r-1', 'pending', NULL::timestamptz, 0, true, true), ('r-2', 'pending', NULL, 0, true, true),
           ('r-3', 'pending', NULL, 0, false, true)$$,
  '... its rows are pending, due now as scheduled rows (ahead of r-3 in the session), in their partition');
SELECT results_eq($$SELECT message_id, os_user, detail LIKE 'was dispatched at %, due at %'
                      FROM outbox.row_events WHERE action = 'replayed' ORDER BY id$$,
  $$VALUES ('r-1', 'carol', true), ('r-2', 'carol', true)$$, '... each with a replayed event');
SELECT is((SELECT count(*) FROM outbox.replay('{r-4}', NULL, NULL, NULL, NULL, 10, false)), 1::bigint,
  'replay by message id');

-- purge_row_events ----------------------------------------------------------------------

UPDATE outbox.row_events SET at = now() - interval '8 days' WHERE message_id = 'p-1';
SELECT throws_ok($$SELECT outbox.purge_row_events(interval '59 minutes', 10)$$, '22023', NULL,
  'purge_row_events keeps at least an hour');
SELECT is(outbox.purge_row_events(interval '7 days', 10), 2, 'events older than the age are purged ...');
SELECT is((SELECT count(*) FROM outbox.row_events WHERE message_id = 'p-1'), 0::bigint, '... those of p-1');

-- workflow_states ------------------------------------------------------------------------

SELECT workflow.start('order-42', 'order', 'AwaitingPayment', correlation_id => 'c-42') AS started \gset
SELECT workflow.start('shipment-9', 'shipping', 'Booked', correlation_id => 'c-42') AS started \gset
SELECT workflow.start('order-43', 'order', 'New') AS started \gset
SELECT workflow.emit('order-42', 'orders', 'order-42:placed:1', 'x') AS emitted \gset
SELECT results_eq($$SELECT id, status, version FROM outbox.workflow_states('order-42')$$,
  $$VALUES ('order-42', 'AwaitingPayment', 1::bigint), ('shipment-9', 'Booked', 1::bigint)$$,
  'workflow_states: the session''s workflow and the one sharing its correlation id');

SELECT * FROM finish();
ROLLBACK;
