-- Shape of the installed schemas: tables, columns, indexes, triggers, comments, function settings.
BEGIN;
SET search_path = public;
SELECT plan(34);

SELECT has_schema('outbox');
SELECT has_schema('workflow');
SELECT tables_are('outbox', ARRAY['messages', 'settings', 'leases', 'instances', 'received_messages', 'row_events'],
  'outbox has exactly its six tables (schema_migrations belongs to the migrator)');
SELECT tables_are('workflow', ARRAY['instances', 'processed_messages', 'compensations']);

SELECT results_eq(
  $$SELECT a.attname::text COLLATE "default", format_type(a.atttypid, a.atttypmod),
           CASE WHEN a.attnotnull THEN 'NO' ELSE 'YES' END,
           coalesce(pg_get_expr(d.adbin, d.adrelid), '') COLLATE "default",
           CASE WHEN a.attidentity <> '' THEN 'YES' ELSE 'NO' END
      FROM pg_attribute a
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = 'outbox.messages'::regclass AND a.attnum > 0 AND NOT a.attisdropped
     ORDER BY a.attnum$$,
  $$VALUES ('id', 'bigint', 'NO', '', 'YES'),
           ('message_id', 'text', 'NO', '', 'NO'),
           ('destination', 'text', 'NO', '', 'NO'),
           ('session_id', 'text', 'YES', '', 'NO'),
           ('correlation_id', 'text', 'YES', '', 'NO'),
           ('parent_message_id', 'text', 'YES', '', 'NO'),
           ('originating_message_id', 'text', 'YES', '', 'NO'),
           ('subject', 'text', 'YES', '', 'NO'),
           ('content_type', 'text', 'YES', '', 'NO'),
           ('headers', 'jsonb', 'NO', '''{}''::jsonb', 'NO'),
           ('body', 'bytea', 'NO', '''\x''::bytea', 'NO'),
           ('ttl', 'interval', 'YES', '', 'NO'),
           ('traceparent', 'text', 'YES', '', 'NO'),
           ('created_at', 'timestamp with time zone', 'NO', 'now()', 'NO'),
           ('due_at', 'timestamp with time zone', 'NO', 'now()', 'NO'),
           ('status', 'text', 'NO', '''pending''::text', 'NO'),
           ('attempts', 'integer', 'NO', '0', 'NO'),
           ('next_attempt_at', 'timestamp with time zone', 'YES', '', 'NO'),
           ('last_error', 'text', 'YES', '', 'NO'),
           ('dispatched_at', 'timestamp with time zone', 'YES', '', 'NO'),
           ('cancelled_at', 'timestamp with time zone', 'YES', '', 'NO'),
           ('partition', 'integer', 'NO', '0', 'NO'),
           ('writer', 'text', 'YES', 'SESSION_USER', 'NO'),
           ('first_failed_at', 'timestamp with time zone', 'YES', '', 'NO'),
           ('last_failed_at', 'timestamp with time zone', 'YES', '', 'NO')$$,
  'outbox.messages has the columns of the SQL contract');
SELECT is((SELECT attidentity::text FROM pg_attribute
            WHERE attrelid = 'outbox.messages'::regclass AND attname = 'id'), 'a',
  'messages.id is GENERATED ALWAYS AS IDENTITY');
SELECT col_is_pk('outbox', 'messages', 'id', 'messages.id is the primary key');
SELECT col_is_unique('outbox', 'messages', ARRAY['message_id', 'writer']::name[], 'messages.message_id is unique per writer');

SELECT is(pg_get_indexdef('outbox.messages_ready_idx'::regclass),
  'CREATE INDEX messages_ready_idx ON outbox.messages USING btree (id) WHERE ((status = ''pending''::text) AND (due_at <= created_at))');
SELECT is(pg_get_indexdef('outbox.messages_scheduled_idx'::regclass),
  'CREATE INDEX messages_scheduled_idx ON outbox.messages USING btree (due_at, id) WHERE ((status = ''pending''::text) AND (due_at > created_at))');
SELECT is(pg_get_indexdef('outbox.messages_blocked_idx'::regclass),
  'CREATE INDEX messages_blocked_idx ON outbox.messages USING btree (session_id, id) WHERE ((status = ''parked''::text) OR ((status = ''pending''::text) AND (next_attempt_at IS NOT NULL)))');
SELECT is(pg_get_indexdef('outbox.messages_due_session_idx'::regclass),
  'CREATE INDEX messages_due_session_idx ON outbox.messages USING btree (session_id, due_at, id) WHERE ((status = ''pending''::text) AND (due_at > created_at))');
SELECT is(pg_get_indexdef('outbox.messages_dispatched_idx'::regclass),
  'CREATE INDEX messages_dispatched_idx ON outbox.messages USING btree (dispatched_at) WHERE (status = ''dispatched''::text)');
SELECT is(pg_get_indexdef('outbox.messages_cancelled_idx'::regclass),
  'CREATE INDEX messages_cancelled_idx ON outbox.messages USING btree (cancelled_at) WHERE (status = ''cancelled''::text)');

SELECT columns_are('outbox', 'leases', ARRAY['partition', 'owner', 'epoch', 'acquired_at', 'renewed_at', 'expires_at']);
SELECT col_is_pk('outbox', 'leases', 'partition', 'leases.partition is the primary key');
SELECT columns_are('outbox', 'instances', ARRAY['instance_id', 'started_at', 'heartbeat_at', 'idle', 'watching']);
SELECT columns_are('workflow', 'instances', ARRAY['id', 'kind', 'status', 'version', 'correlation_id',
  'originating_message_id', 'timeout_message_id', 'timeout_due_at', 'data', 'created_at', 'updated_at', 'writer']);
SELECT columns_are('workflow', 'processed_messages', ARRAY['workflow_id', 'message_id', 'processed_at', 'writer', 'sender']);
SELECT col_is_pk('workflow', 'processed_messages', ARRAY['workflow_id', 'writer', 'message_id', 'sender']::name[],
  'processed_messages is keyed by (workflow_id, writer, message_id, sender)');
SELECT columns_are('workflow', 'compensations', ARRAY['workflow_id', 'step', 'message_id', 'status',
  'attempts', 'last_error', 'created_at', 'updated_at', 'writer']);
SELECT col_is_unique('workflow', 'compensations', ARRAY['message_id', 'writer']::name[],
  'compensation message ids are unique per writer');

SELECT triggers_are('outbox', 'messages', ARRAY['messages_set_partition',
                                                'messages_wakeup_requeue', 'messages_wakeup_reschedule',
                                                'messages_status_event', 'messages_guard_update',
                                                'messages_guard_delete']);

SELECT is((SELECT partition_count FROM outbox.settings), 64, 'default partition count is 64');
SELECT results_eq('SELECT partition, owner, epoch FROM outbox.leases ORDER BY partition',
  $$SELECT p, NULL::text, 0::bigint FROM generate_series(0, 63) p$$,
  'one free lease row per partition');
SELECT matches((SELECT prosrc FROM pg_proc WHERE oid = 'outbox.messages_set_partition()'::regprocedure),
  'OPERATOR\(pg_catalog\.%\) 64;', 'the partition count is a literal in the trigger function');

SELECT is_empty($$
  SELECT p.oid::regprocedure::text FROM pg_proc p
   WHERE p.pronamespace IN ('outbox'::regnamespace, 'workflow'::regnamespace)
     AND obj_description(p.oid, 'pg_proc') IS NULL$$,
  'every function has a comment');
SELECT is_empty($$
  SELECT c.oid::regclass::text FROM pg_class c
   WHERE c.relnamespace IN ('outbox'::regnamespace, 'workflow'::regnamespace) AND c.relkind = 'r'
     AND obj_description(c.oid, 'pg_class') IS NULL$$,
  'every table has a comment');
-- Hot-path exceptions: text_ok(), headers_suspect(), address_or_reserved() and
-- beyond_latin1() have SQL-standard bodies, bound at creation (and inlinable
-- because they have no SET); the partition trigger qualifies every name;
-- workflow_states() and conversation_states() read the workflow schema first.
SELECT results_eq($$
  SELECT p.oid::regprocedure::text FROM pg_proc p
   WHERE p.pronamespace = 'outbox'::regnamespace
     AND NOT coalesce(p.proconfig, '{}') @> ARRAY['search_path=outbox, pg_catalog, pg_temp']
   ORDER BY 1$$,
  $$VALUES ('outbox.address_or_reserved(text)'), ('outbox.beyond_latin1(text)'), ('outbox.conversation_states(text)'),
           ('outbox.headers_suspect(jsonb)'), ('outbox.messages_set_partition()'),
           ('outbox.text_ok(text,integer)'), ('outbox.workflow_states(text)')$$,
  'every other outbox function pins search_path to outbox, pg_catalog, pg_temp');
SELECT ok((SELECT prosqlbody IS NOT NULL FROM pg_proc WHERE oid = 'outbox.text_ok(text,integer)'::regprocedure),
  'text_ok() has a body bound at creation');
SELECT is_empty($$
  SELECT p.oid::regprocedure::text FROM pg_proc p
   WHERE p.pronamespace = 'workflow'::regnamespace
     AND NOT coalesce(p.proconfig, '{}') @> ARRAY['search_path=workflow, outbox, pg_catalog, pg_temp']$$,
  'every workflow function pins search_path to workflow, outbox, pg_catalog, pg_temp');
SELECT results_eq($$
  SELECT p.oid::regprocedure::text FROM pg_proc p
   WHERE p.pronamespace IN ('outbox'::regnamespace, 'workflow'::regnamespace) AND p.prosecdef
   ORDER BY 1$$,
  $$VALUES ('outbox.cancel(text)'),
           ('outbox.conversation_states(text)'),
           ('outbox.delete_accepted(bigint[],text)'),
           ('outbox.deregister_instance(text)'),
           ('outbox.enqueue(text,text,bytea,text,text,text,text,text,text,jsonb,interval,text,timestamp with time zone)'),
           ('outbox.enqueue(text,text,jsonb,text,text,text,text,text,text,jsonb,interval,text,timestamp with time zone)'),
           ('outbox.enqueue(text,text,text,text,text,text,text,text,text,jsonb,interval,text,timestamp with time zone)'),
           ('outbox.fire_scheduled(text,text,text,text)'),
           ('outbox.forget_silent_instances(text,interval)'),
           ('outbox.message_receipts(text,text)'),
           ('outbox.messages_set_partition()'),
           ('outbox.notify_wakeup()'),
           ('outbox.purge_cancelled(interval,integer)'),
           ('outbox.purge_dispatched(interval,integer)'),
           ('outbox.purge_received(interval,integer)'),
           ('outbox.purge_row_events(interval,integer)'),
           ('outbox.record_status_change()'),
           ('outbox.refresh_statistics()'),
           ('outbox.replay(text[],text,text,timestamp with time zone,timestamp with time zone,integer,boolean,text,text)'),
           ('outbox.requeue_parked(text[],text,boolean,text,text)'),
           ('outbox.reschedule(text,timestamp with time zone)'),
           ('outbox.skip_parked(text[],text,boolean,text,text)'),
           ('outbox.standby_position(text)'),
           ('outbox.workflow_states(text)'),
           ('workflow.purge_processed(interval,integer)'),
           ('workflow.remove(text)')$$,
  'security definer: exactly enqueue, cancel, reschedule, the operator''s functions, which write row_events, '
  'workflow_states(), conversation_states(), message_receipts(), standby_position() and refresh_statistics(), the purges and remove(), which delete what writers may not, '
  'the dispatcher''s deletes, which take no DELETE grant, and the triggers that look for an idle instance, record a status change or read what writers may not');
SELECT is_empty($$
  SELECT p.oid::regprocedure::text FROM pg_proc p
   WHERE p.pronamespace IN ('outbox'::regnamespace, 'workflow'::regnamespace)
     AND has_function_privilege('public', p.oid, 'EXECUTE')$$,
  'no function is executable by PUBLIC');
SELECT set_eq($$
  SELECT p.pronamespace::regnamespace || '.' || p.proname, format_type(p.prorettype, NULL) FROM pg_proc p
   WHERE p.pronamespace IN ('outbox'::regnamespace, 'workflow'::regnamespace)
     AND p.prorettype NOT IN ('trigger'::regtype, 'void'::regtype) AND p.proname NOT LIKE '%_valid'
     -- internal helpers of the row rules, of cancel() and reschedule() and of the purges
     AND p.proname NOT IN ('text_ok', 'headers_suspect', 'address_or_reserved', 'beyond_latin1', 'destination_problem',
                           'plain_name_allowed', 'lock_waiting_row', 'lock_parked', 'replay_targets', 'change_parked',
                           'purge_own_rows')$$,
  $$VALUES ('outbox.enqueue', 'bigint'), ('outbox.cancel', 'boolean'), ('outbox.set_partition_count', 'bigint'),
           ('outbox.reschedule', 'boolean'), ('outbox.headers_problem', 'text'), ('outbox.destination_allowed', 'boolean'),
           ('outbox.record_received', 'boolean'), ('outbox.purge_received', 'integer'), ('workflow.emit', 'bigint'),
           ('workflow.start', 'boolean'), ('workflow.save', 'bigint'), ('workflow.record_processed', 'boolean'),
           ('workflow.purge_processed', 'integer'), ('workflow.set_timeout', 'bigint'),
           ('workflow.clear_timeout', 'boolean'), ('workflow.record_compensation', 'boolean'),
           ('workflow.set_compensation_status', 'boolean'), ('workflow.remove', 'boolean'),
           ('outbox.requeue_parked', 'text'), ('outbox.skip_parked', 'text'), ('outbox.replay', 'record'),
           ('outbox.purge_row_events', 'integer'), ('outbox.workflow_states', 'record'), ('outbox.fire_scheduled', 'text'),
           ('outbox.standby_position', 'record'), ('outbox.delete_accepted', 'bigint'),
           ('outbox.purge_dispatched', 'bigint'), ('outbox.purge_cancelled', 'bigint'),
           ('outbox.deregister_instance', 'boolean'), ('outbox.forget_silent_instances', 'bigint'),
           ('outbox.conversation_states', 'record'), ('outbox.message_receipts', 'record')$$,
  'the API functions and their return types, as the Reference of docs/sql.md lists them');

SELECT * FROM finish();
ROLLBACK;
