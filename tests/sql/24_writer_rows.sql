-- Each writer's inbox entries and workflow state are its own (023): two writer login roles side by side, one alone as the docs use it, and an upgrade of rows written before 023.
SELECT sqltest.writer_login('app_a');
SELECT sqltest.writer_login('app_b');

BEGIN;
SET search_path = public;
SELECT plan(42);

-- No writer can lock these tables beyond ROW EXCLUSIVE ------------------------------
-- First, while this transaction holds no lock on them.

SELECT is_empty($$
  SELECT t, mode, answer FROM unnest(ARRAY['workflow.instances', 'workflow.processed_messages', 'workflow.compensations',
                                           'outbox.received_messages']) t,
         unnest(ARRAY['ROW SHARE', 'SHARE UPDATE EXCLUSIVE', 'SHARE', 'SHARE ROW EXCLUSIVE', 'EXCLUSIVE',
                      'ACCESS EXCLUSIVE']) mode,
         sqltest.try_login('app_a', format('SET lock_timeout = ''2s''; LOCK TABLE %s IN %s MODE', t, mode)) answer
   WHERE answer NOT LIKE '42501: permission denied for table %'$$,
  'LOCK TABLE in any mode that blocks other writers is refused on the inbox and the workflow tables');
SELECT is(sqltest.try_login('app_a', $$SELECT version FROM workflow.instances WHERE id = 'order-42' FOR UPDATE;
                                       LOCK TABLE workflow.instances IN ACCESS SHARE MODE$$), 'ok',
  'row locks of its own rows and ACCESS SHARE stay');

-- The inbox: dedupe, reads, updates and purges are per writer ---------------------

SELECT is(sqltest.ask_login('app_a', $$SELECT outbox.record_received('billing-svc', 'inv-1')::text$$), 'true',
  'app_a records inv-1 for consumer billing-svc');
SELECT is(sqltest.ask_login('app_b', $$SELECT outbox.record_received('billing-svc', 'inv-1')::text$$), 'true',
  'app_b''s first delivery of the same id to a consumer of the same name is not a duplicate');
SELECT is(sqltest.ask_login('app_b', $$SELECT outbox.record_received('billing-svc', 'inv-1')::text$$), 'false',
  '... its redelivery is');
SELECT is(sqltest.ask_login('app_a', $$SELECT outbox.record_received('billing-svc', 'inv-2')::text$$), 'true',
  'app_a records inv-2');
SELECT is(sqltest.ask_login('app_b', $$SELECT string_agg(consumer || ' ' || message_id, ', ')
                                         FROM outbox.received_messages$$), 'billing-svc inv-1',
  'app_b reads only its own inbox entries');
SELECT is(sqltest.try_login('app_b', $$UPDATE outbox.received_messages SET received_at = '2000-01-01'$$), 'ok',
  'app_b ages every inbox entry it can update ...');
SELECT results_eq($$SELECT count(*) FILTER (WHERE received_at < '2001-01-01'), count(*) FROM outbox.received_messages$$,
  $$VALUES (1::bigint, 3::bigint)$$, '... which are its own only: one of three');
SELECT is(sqltest.try_login('app_a', $$UPDATE outbox.received_messages SET received_at = '2000-01-01'$$), 'ok',
  'app_a ages its own');
SELECT is(sqltest.ask_login('app_b', $$SELECT outbox.purge_received('1 day')::text$$), '1',
  'app_b''s purge deletes its own old entry ...');
SELECT is((SELECT count(*) FROM outbox.received_messages), 2::bigint, '... and none of app_a''s');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.purge_received('-1 year 364 days')$$),
  '22023: older_than must not reach into the future',
  'a purge age a month short of a year back, which cuts a day into the future, is refused (inbox) ...');
SELECT is(sqltest.try_login('app_a', $$SELECT workflow.purge_processed('-1 year 364 days')$$),
  '22023: older_than must not reach into the future', '... and for processed ids');
SELECT is(sqltest.try_login('app_b', 'DELETE FROM outbox.received_messages'), '42501: permission denied for table received_messages',
  'writers delete inbox entries only through purge_received()');

-- Workflow state: ids, reads, writes and functions are per writer ----------------

SELECT is(sqltest.ask_login('app_a', $$SELECT workflow.start('order-42', 'order', 'New', data => '{"card": "a"}')::text$$),
  'true', 'app_a starts order-42');
SELECT is(sqltest.ask_login('app_b', $$SELECT workflow.start('order-42', 'order', 'New')::text$$), 'true',
  'app_b starts its own order-42: not shadowed by app_a''s');
SELECT is(sqltest.ask_login('app_b', $$SELECT string_agg(data::text, ', ') FROM workflow.instances$$), '{}',
  'app_b reads only its own state record, not app_a''s data');
SELECT is(sqltest.try_login('app_a', $$SELECT workflow.start('a-only', 'order', 'New');
                                       SELECT workflow.record_processed('a-only', 'm-1');
                                       SELECT workflow.record_compensation('a-only', 'refund', 'a-only:refund:1')$$), 'ok',
  'app_a starts a-only, with a processed id and a compensation');
SELECT is(sqltest.try_login('app_b', $$UPDATE workflow.instances SET status = 'Hijacked', data = '{}'$$), 'ok',
  'app_b updates every state record it can ...');
SELECT results_eq($$SELECT id, status FROM workflow.instances ORDER BY 1, 2$$,
  $$VALUES ('a-only', 'New'), ('order-42', 'Hijacked'), ('order-42', 'New')$$,
  '... which is its own only');
SELECT is(sqltest.try_login('app_b', $$SELECT workflow.save('a-only', 1, 'Hijacked')$$),
  '40001: workflow "a-only" does not exist: reload and retry', 'save() of another writer''s workflow: it does not exist');
SELECT is(sqltest.try_login('app_b', $$SELECT workflow.record_processed('a-only', 'm-2')$$),
  '23503: workflow "a-only" does not exist', 'record_processed(): the same');
SELECT is(sqltest.try_login('app_b', $$SELECT workflow.emit('a-only', 'orders', 'b-1', 'x')$$),
  'P0002: workflow "a-only" does not exist', 'emit(): the same');
SELECT is(sqltest.try_login('app_b', $$SELECT workflow.set_timeout('a-only', 'b-t1', now() + interval '1 day', 'orders')$$),
  'P0002: workflow "a-only" does not exist', 'set_timeout(): the same');
SELECT is(sqltest.try_login('app_b', $$SELECT workflow.clear_timeout('a-only')$$),
  'P0002: workflow "a-only" does not exist', 'clear_timeout(): the same');
SELECT is(sqltest.ask_login('app_b', $$SELECT workflow.set_compensation_status('a-only', 'refund', 'failed')::text$$), 'false',
  'set_compensation_status() of another writer''s step: never recorded');
SELECT is(sqltest.try_login('app_b', $$SELECT workflow.record_compensation('order-42', 'refund', 'a-only:refund:1')$$),
  'ok', 'a compensation message id another writer used is free for app_b');
SELECT is(sqltest.try_login('app_b', $$DELETE FROM workflow.instances$$), '42501: permission denied for table instances',
  'writers delete state records only through remove() ...');
SELECT is(sqltest.ask_login('app_b', $$SELECT workflow.remove('a-only')::text$$), 'false',
  '... which does not know another writer''s workflow');
SELECT results_eq($$SELECT (SELECT count(*) FROM workflow.instances WHERE id = 'a-only'),
                           (SELECT count(*) FROM workflow.processed_messages WHERE workflow_id = 'a-only'),
                           (SELECT status FROM workflow.compensations WHERE workflow_id = 'a-only')$$,
  $$VALUES (1::bigint, 1::bigint, 'pending')$$, 'app_a''s workflow is untouched');
SELECT is(sqltest.ask_login('app_a', $$SELECT workflow.remove('a-only')::text$$), 'true', 'app_a removes its own ...');
SELECT results_eq($$SELECT (SELECT count(*) FROM workflow.processed_messages WHERE workflow_id = 'a-only'),
                           (SELECT count(*) FROM workflow.compensations WHERE workflow_id = 'a-only')$$,
  $$VALUES (0::bigint, 0::bigint)$$, '... with its processed ids and compensations');
SELECT is(sqltest.ask_login((SELECT login_role FROM sqltest.login_roles WHERE group_role = 'outbox_dispatcher'),
                            $$SELECT string_agg(status, ', ' ORDER BY status) FROM outbox.workflow_states('order-42')$$),
  'Hijacked, New', 'the dispatcher''s workflow_states() (outboxd timeline) sees every writer''s order-42');

-- One writer alone: the plain SQL of docs/sql.md works as written -------------------

SELECT is(sqltest.try_login('app_a', $$
  SELECT workflow.start(id => 'order-7', kind => 'order-fulfilment', status => 'AwaitingInventory',
                        correlation_id => 'c-7', originating_message_id => 'orders:order-placed:7',
                        data => '{"orderId": 7}');
  SELECT workflow.record_processed('order-7', 'orders:order-placed:7');
  SELECT workflow.emit('order-7', 'inventory', 'order-7:reserve-inventory:1', '{"orderId": 7}'::jsonb);
  SELECT status, version, data, correlation_id, originating_message_id FROM workflow.instances WHERE id = 'order-7';
  SELECT workflow.save('order-7', 1, 'AwaitingPayment', '{"orderId": 7, "reservationId": "r-1"}');
  SELECT workflow.set_timeout('order-7', 'order-7:payment-timeout:1', now() + interval '24 hours', 'orders', '{}'::jsonb);
  SELECT status = 'AwaitingPayment' AND timeout_message_id = 'order-7:payment-timeout:1' FROM workflow.instances
   WHERE id = 'order-7';
  SELECT workflow.clear_timeout('order-7');
  SELECT workflow.record_compensation('order-7', 'release-inventory', 'order-7:release-inventory:1');
  SELECT workflow.set_compensation_status('order-7', 'release-inventory', 'completed');
  SELECT step, status FROM workflow.compensations WHERE workflow_id = 'order-7';
  SELECT * FROM workflow.processed_messages WHERE workflow_id = 'order-7' ORDER BY processed_at;
  UPDATE workflow.instances SET data = data || '{"note": "manual fix"}' WHERE id = 'order-7';
  SELECT workflow.purge_processed(interval '30 days', 1000);
  SELECT outbox.record_received('stock', 'order-7:reserve-stock:1');
  SELECT consumer, count(*) FROM outbox.received_messages GROUP BY 1;
  SELECT outbox.purge_received(interval '30 days', 1000)$$), 'ok',
  'app_a runs the documented start, transition, timeout, compensation, inbox and retention statements');
SELECT results_eq($$SELECT status, version, data->>'note', timeout_message_id FROM workflow.instances WHERE id = 'order-7'$$,
  $$VALUES ('AwaitingPayment', 2::bigint, 'manual fix', NULL::text)$$, '... with the documented effects');
SELECT is(sqltest.try_login('app_a', $$INSERT INTO workflow.instances (id, kind, status, writer) VALUES ('x', 'k', 's', 'app_b')$$),
  '42501: permission denied for table instances', 'a writer cannot choose the writer column');

-- Upgrade: rows written before 023 belong to the role the migration is told ---------

SELECT set_config('outboxd.schema', 'Up Outbox', true) AS s, set_config('outboxd.workflow_schema', 'up wf', true) AS w \gset
\ir ../../sql/001_outbox.sql
\ir ../../sql/002_workflow.sql
\ir ../../sql/003_roles.sql
\ir ../../sql/011_inbox.sql
SELECT "up wf".start('order-1', 'order', 'New');
SELECT "up wf".record_processed('order-1', 'm-1');
SELECT "up wf".record_compensation('order-1', 'refund', 'order-1:refund:1');
SELECT "Up Outbox".record_received('stock', 'm-1');
SET LOCAL search_path = public;
CREATE ROLE up_app IN ROLE "Up Outbox_writer";
\set migration_023 `cat "$OUTBOXD_SQLTEST_ROOT/sql/023_writer_rows.sql"`
SELECT throws_ok(:'migration_023', '55000', NULL,
  'with rows written before it and no legacy writer named, 023 is refused: they would be no writer''s');
SELECT set_config('outboxd.legacy_writer', 'no_such_role', true) AS l \gset
SELECT throws_ok(:'migration_023', '42704', 'outboxd.legacy_writer names role "no_such_role", which does not exist',
  'a legacy writer that is no role is refused');
SELECT set_config('outboxd.legacy_writer', 'up_app', true) AS l \gset
\ir ../../sql/023_writer_rows.sql
SET LOCAL search_path = public;

SELECT results_eq($$SELECT (SELECT string_agg(DISTINCT writer, ',') FROM "up wf".instances),
                           (SELECT string_agg(DISTINCT writer, ',') FROM "up wf".processed_messages),
                           (SELECT string_agg(DISTINCT writer, ',') FROM "up wf".compensations),
                           (SELECT string_agg(DISTINCT writer, ',') FROM "Up Outbox".received_messages)$$,
  $$VALUES ('up_app', 'up_app', 'up_app', 'up_app')$$,
  'rows written before 023 belong to the legacy writer (quoted schema names)');
SET SESSION AUTHORIZATION up_app;
SELECT "up wf".start('order-1', 'order', 'New') AS started_again,
       "up wf".record_processed('order-1', 'm-1') AS processed_again,
       "up wf".save('order-1', 1, 'Paid') AS saved,
       "up wf".record_compensation('order-1', 'refund', 'order-1:refund:1') AS compensated_again,
       "Up Outbox".record_received('stock', 'm-1') AS received_again \gset
RESET SESSION AUTHORIZATION;
SELECT is(ROW(:'started_again'::boolean, :'processed_again'::boolean, :'saved'::bigint, :'compensated_again'::boolean,
              :'received_again'::boolean)::text,
  '(f,f,2,f,f)',
  'its running workflow is not started again, its deliveries are not processed twice, its state saves');
CREATE ROLE up_other IN ROLE "Up Outbox_writer";
UPDATE "up wf".instances SET writer = 'up_other' WHERE id = 'order-1';
SELECT results_eq($$SELECT (SELECT string_agg(DISTINCT writer, ',') FROM "up wf".processed_messages),
                           (SELECT string_agg(DISTINCT writer, ',') FROM "up wf".compensations)$$,
  $$VALUES ('up_other', 'up_other')$$,
  'a DBA assigns a state record to another application: its processed ids and compensations follow');

SELECT * FROM finish();
ROLLBACK;
