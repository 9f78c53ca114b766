-- The scripts applied the way outboxd migrate applies them, to names that need quoting and 8 partitions.
--
-- Everything, roles included, is created inside this test's transaction and
-- rolled back at the end.
BEGIN;
SET search_path = public;
SELECT plan(31);

SELECT set_config('outboxd.schema', 'Billing Outbox', true) AS s,
       set_config('outboxd.workflow_schema', 'billing_wf', true) AS w,
       set_config('outboxd.partitions', '8', true) AS p \gset
\ir ../../sql/001_outbox.sql
\ir ../../sql/002_workflow.sql
\ir ../../sql/003_roles.sql
\ir ../../sql/004_due_order.sql
\ir ../../sql/005_row_check.sql
\ir ../../sql/006_workflow_row_check.sql
\ir ../../sql/007_wakeup_in_partition_trigger.sql
\ir ../../sql/008_dispatcher_row_check.sql
\ir ../../sql/009_writer_isolation.sql
\ir ../../sql/010_reschedule.sql
\ir ../../sql/011_inbox.sql
\ir ../../sql/012_workflow_emit.sql
\ir ../../sql/013_timeout_lock.sql
\ir ../../sql/014_operations.sql
\ir ../../sql/015_backlog_index.sql
\ir ../../sql/016_allowed_destinations.sql
\ir ../../sql/017_wakeup_on_any_move.sql
\ir ../../sql/018_destination_check_cost.sql
\ir ../../sql/019_writer_session_scope.sql
\ir ../../sql/020_destination_lanes.sql
\ir ../../sql/021_destination_charset.sql
\ir ../../sql/022_row_trail.sql
SET LOCAL search_path = public;

SELECT has_schema('Billing Outbox');
SELECT has_index('Billing Outbox', 'messages', 'messages_due_session_idx', ARRAY['session_id', 'due_at', 'id']);
SELECT has_schema('billing_wf');
SELECT tables_are('Billing Outbox', ARRAY['messages', 'settings', 'leases', 'instances', 'received_messages', 'row_events']);
SELECT tables_are('billing_wf', ARRAY['instances', 'processed_messages', 'compensations']);
SELECT is((SELECT partition_count FROM "Billing Outbox".settings), 8, 'partition count from outboxd.partitions');
SELECT is((SELECT count(*) FROM "Billing Outbox".leases), 8::bigint, '8 lease rows');
SELECT is_empty($$
  SELECT p.oid::regprocedure::text FROM pg_proc p
   WHERE p.pronamespace = '"Billing Outbox"'::regnamespace
     AND p.proname NOT IN ('messages_set_partition', 'text_ok', 'address_or_reserved', 'beyond_latin1', 'headers_suspect',
                           'workflow_states', 'conversation_states')
     AND NOT coalesce(p.proconfig, '{}') @> ARRAY['search_path="Billing Outbox", pg_catalog, pg_temp']$$,
  'outbox functions pin the quoted schema');
SELECT is_empty($$
  SELECT p.oid::regprocedure::text FROM pg_proc p
   WHERE p.pronamespace = 'billing_wf'::regnamespace
     AND NOT coalesce(p.proconfig, '{}') @> ARRAY['search_path=billing_wf, "Billing Outbox", pg_catalog, pg_temp']$$,
  'workflow functions pin both schemas');

SELECT "Billing Outbox".enqueue('invoices', 'inv-1', 'x', session_id => 'acct-9') AS inv_id \gset
SELECT is((SELECT partition FROM "Billing Outbox".messages WHERE id = :inv_id), sqltest.partition_of('acct-9', 8),
  'enqueue into the custom schema, partition modulo 8');
SELECT is((SELECT count(*) FROM outbox.messages), 0::bigint, 'the default outbox is untouched');
SELECT throws_ok($$INSERT INTO "Billing Outbox".messages (message_id, destination) VALUES ('inv-bad', '')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_destination_valid"',
  'the custom schema checks its rows');

SELECT billing_wf.start('acct-9', 'dunning', 'Open', correlation_id => 'c-9') AS started \gset
SELECT billing_wf.set_timeout('acct-9', 'acct-9:reminder:1', now() + interval '7 days', 'invoices', '{}'::jsonb) AS t1 \gset
SELECT results_eq($$SELECT session_id, correlation_id, status FROM "Billing Outbox".messages WHERE message_id = 'acct-9:reminder:1'$$,
  $$VALUES ('acct-9', 'c-9', 'pending')$$, 'the workflow schema schedules into its own outbox');
SELECT is(billing_wf.clear_timeout('acct-9'), true, '... and cancels there');
SELECT is((SELECT count(*) FROM workflow.instances), 0::bigint, 'the default workflow schema is untouched');

-- The wake-up channel is <schema>_wakeup. Inserts name it, and the instances
-- table, in the generated partition trigger. A requeue calls pg_notify through
-- the pinned search_path, so a stand-in pg_notify in the outbox schema
-- (searched before pg_catalog) records that call.
SELECT matches((SELECT prosrc FROM pg_proc WHERE oid = '"Billing Outbox".messages_set_partition()'::regprocedure),
  'FROM "Billing Outbox"\.instances i WHERE i\.idle\) THEN\s+PERFORM pg_catalog\.pg_notify\(''Billing Outbox_wakeup'', ''''\)',
  'inserts notify "Billing Outbox_wakeup" while an instance of "Billing Outbox" is idle');
CREATE TABLE pg_temp.notified (channel text, payload text);
CREATE FUNCTION "Billing Outbox".pg_notify(channel text, payload text) RETURNS void LANGUAGE sql
  AS $$ INSERT INTO pg_temp.notified VALUES (channel, payload) $$;
INSERT INTO "Billing Outbox".instances (instance_id, idle) VALUES ('i-1', true);
SELECT "Billing Outbox".enqueue('invoices', 'inv-2', 'x') AS inv2 \gset
UPDATE "Billing Outbox".messages SET status = 'parked' WHERE message_id = 'inv-2';
UPDATE "Billing Outbox".messages SET status = 'pending' WHERE message_id = 'inv-2';
SELECT results_eq('SELECT channel, payload FROM pg_temp.notified', $$VALUES ('Billing Outbox_wakeup', '')$$,
  'a requeue notifies "Billing Outbox_wakeup"');
DROP FUNCTION "Billing Outbox".pg_notify(text, text);

SELECT has_role('Billing Outbox_writer');
SELECT has_role('Billing Outbox_dispatcher');
SELECT is(sqltest.try_as('Billing Outbox_writer', $$SELECT "Billing Outbox".enqueue('invoices', 'inv-3', 'x')$$), 'ok',
  'its writer enqueues into it');
SELECT is(sqltest.try_as('Billing Outbox_writer', $$SELECT billing_wf.start('acct-10', 'dunning', 'Open')$$), 'ok',
  '... and writes its workflow state');
SELECT is(sqltest.try_as('Billing Outbox_writer', $$SELECT outbox.enqueue('orders', 'x-1', 'x')$$), '42501',
  '... but has no access to the default outbox');
SELECT is(sqltest.try_as('outbox_writer', $$SELECT "Billing Outbox".enqueue('invoices', 'inv-4', 'x')$$), '42501',
  'the default writer has no access to it');
SELECT is(sqltest.try_as('Billing Outbox_dispatcher', $$SELECT count(*) FROM "Billing Outbox".messages$$), 'ok',
  'its dispatcher reads its messages');
SELECT is(sqltest.try_as('Billing Outbox_dispatcher', $$SELECT count(*) FROM outbox.messages$$), '42501',
  '... and not the default outbox''s');

-- 022: the trail and the guard work under the quoted names.
SELECT "Billing Outbox".enqueue('invoices', 'inv-5', 'x', due_at => now() + interval '1 day') AS inv5 \gset
UPDATE "Billing Outbox".messages SET status = 'parked' WHERE message_id = 'inv-2';
SELECT is(sqltest.try_as('Billing Outbox_dispatcher',
  $$UPDATE "Billing Outbox".messages SET status = 'pending' WHERE message_id = 'inv-2'$$), '42501',
  'its dispatcher cannot requeue a parked row by UPDATE ...');
SELECT is(sqltest.try_as('Billing Outbox_dispatcher', $$SELECT "Billing Outbox".requeue_parked('{inv-2}', os_user => 'eve')$$),
  'ok', '... but through requeue_parked()');
SELECT is(sqltest.try_as('Billing Outbox_dispatcher', $$SELECT "Billing Outbox".fire_scheduled('inv-5', NULL)$$), 'ok',
  '... and fires with fire_scheduled()');
SELECT is((SELECT string_agg(action || coalesce('/' || os_user, ''), ', ' ORDER BY id) FROM "Billing Outbox".row_events
            WHERE message_id IN ('inv-2', 'inv-5')),
  'parked, requeued, parked, requeued/eve, fired', 'each change has its event in its own trail');

SELECT is("Billing Outbox".set_partition_count(4),
  (SELECT count(*) FROM "Billing Outbox".messages
    WHERE status IN ('pending', 'parked') AND partition <> sqltest.partition_of(coalesce(session_id, message_id), 4)),
  'set_partition_count in the custom schema re-hashes its rows');
SELECT matches((SELECT prosrc FROM pg_proc WHERE oid = '"Billing Outbox".messages_set_partition()'::regprocedure),
  'OPERATOR\(pg_catalog\.%\) 4;', '... rewrites its own trigger function');

SELECT * FROM finish();
ROLLBACK;
