-- 031_conversations: a conversation's rows by index, its workflow state records and its receipts, for the dispatcher only; reschedule() leaves a trail.
BEGIN;
SET search_path = public;
SELECT plan(16);

-- Schema ---------------------------------------------------------------------------

SELECT is(pg_get_indexdef('outbox.messages_correlation_idx'::regclass),
  'CREATE INDEX messages_correlation_idx ON outbox.messages USING btree (correlation_id, id) '
  'WHERE (correlation_id IS NOT NULL)',
  'rows by correlation id, in id order');
SELECT is(pg_get_indexdef('workflow.instances_correlation_idx'::regclass),
  'CREATE INDEX instances_correlation_idx ON workflow.instances USING btree (correlation_id) '
  'WHERE (correlation_id IS NOT NULL)',
  'state records by correlation id');

-- Grants ------------------------------------------------------------------------------

SELECT is(sqltest.try_as('outbox_dispatcher', $$SELECT * FROM outbox.conversation_states('c')$$)
          || ' ' || sqltest.try_as('outbox_dispatcher', $$SELECT * FROM outbox.message_receipts('m', 'w')$$),
  'ok ok', 'the dispatcher may ask for a conversation''s state records and a message''s receipts ...');
SELECT is(sqltest.try_as('outbox_dispatcher', 'SELECT * FROM outbox.received_messages'), '42501',
  '... but not read the inbox');
SELECT is(sqltest.try_as('outbox_writer', $$SELECT * FROM outbox.conversation_states('c')$$)
          || ' ' || sqltest.try_as('outbox_writer', $$SELECT * FROM outbox.message_receipts('m', 'w')$$),
  '42501 42501', 'writers may not: they would see other writers'' records');

-- conversation_states -------------------------------------------------------------------

SELECT workflow.start('order-42', 'order', 'AwaitingPayment', correlation_id => 'c-42') AS started \gset
SELECT workflow.start('payment-7', 'payment', 'Authorised', correlation_id => 'c-42') AS started \gset
SELECT workflow.start('order-43', 'order', 'New', correlation_id => 'c-43') AS started \gset
SELECT workflow.start('order-44', 'order', 'New') AS started \gset
SELECT results_eq($$SELECT id, kind, status, version, writer = session_user FROM outbox.conversation_states('c-42')$$,
  $$VALUES ('order-42', 'order', 'AwaitingPayment', 1::bigint, true), ('payment-7', 'payment', 'Authorised', 1::bigint, true)$$,
  'conversation_states: the records of the correlation id, with their writer');
SELECT is_empty($$SELECT * FROM outbox.conversation_states('c-99')$$, '... none for another');
-- As outboxd's connections plan: without sequential or bitmap scans (lib/pg/connect_params.cpp).
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT ok(sqltest.explain($$SELECT * FROM workflow.instances i WHERE i.correlation_id = 'c-42'$$)
            LIKE '%instances_correlation_idx%',
  '... found through instances_correlation_idx');

-- message_receipts ----------------------------------------------------------------------

SELECT outbox.record_received('billing', 'order-42:placed', 'app_a') AS r1 \gset
SELECT outbox.record_received('audit', 'order-42:placed') AS r2 \gset
SELECT outbox.record_received('shipping', 'order-42:placed', 'app_b') AS r3 \gset
SELECT outbox.record_received('billing', 'order-43:placed', 'app_a') AS r4 \gset
SELECT results_eq($$SELECT consumer, sender FROM outbox.message_receipts('order-42:placed', 'app_a') ORDER BY consumer$$,
  $$VALUES ('audit', ''), ('billing', 'app_a')$$,
  'message_receipts: each consumer''s entry under the sending writer or under '''' ...');
SELECT results_eq($$SELECT consumer FROM outbox.message_receipts('order-42:placed', 'app_b') ORDER BY consumer$$,
  $$VALUES ('audit'), ('shipping')$$, '... not another sender''s message of the same id');
SELECT is_empty($$SELECT * FROM outbox.message_receipts('order-45:placed', 'app_a')$$, '... none for a message not received');

-- The conversation's rows ------------------------------------------------------------------

SELECT count(outbox.enqueue('orders', 'x-' || i, 'x', correlation_id => 'c-' || (i % 50))) AS enqueued
  FROM generate_series(1, 500) i \gset
ANALYZE outbox.messages;
SELECT ok(sqltest.explain($$SELECT id FROM outbox.messages m WHERE m.correlation_id = 'c-7' ORDER BY m.id DESC LIMIT 100$$)
            LIKE '%Scan Backward using messages_correlation_idx%',
  'a conversation''s newest rows: messages_correlation_idx read backwards');

-- reschedule() ------------------------------------------------------------------------------

SELECT outbox.enqueue('orders', 'later-1', 'x', due_at => now() + interval '1 hour') AS later \gset
SELECT ok(outbox.reschedule('later-1', now()), 'reschedule() moves a waiting row ...');
SELECT results_eq($$SELECT action, db_role = session_user, os_user IS NULL, detail LIKE 'was due at %'
                      FROM outbox.row_events WHERE message_id = 'later-1'$$,
  $$VALUES ('rescheduled', true, true, true)$$, '... and records the move, with the due time it had');
SELECT is(outbox.reschedule('later-1', now() + interval '1 day'), false, 'a row already due is not moved ...');
SELECT is((SELECT count(*) FROM outbox.row_events WHERE message_id = 'later-1'), 1::bigint, '... nor recorded');

SELECT * FROM finish();
ROLLBACK;
