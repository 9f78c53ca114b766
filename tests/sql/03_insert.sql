-- Plain INSERT into outbox.messages: what the database derives, and the CHECK constraints by name.
BEGIN;
SET search_path = public;
SELECT plan(31);

INSERT INTO outbox.messages (message_id, destination, body) VALUES ('plain-1', 'orders', 'hello');
SELECT results_eq($$
  SELECT status, attempts, created_at, due_at, headers, next_attempt_at, dispatched_at, cancelled_at, partition
    FROM outbox.messages WHERE message_id = 'plain-1'$$,
  $$VALUES ('pending', 0, now(), now(), '{}'::jsonb, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
            sqltest.partition_of('plain-1', 64))$$,
  'status, attempts, timestamps, headers and partition are derived');
SELECT ok((SELECT due_at <= created_at FROM outbox.messages WHERE message_id = 'plain-1'),
  'a row without due_at is immediate');

INSERT INTO outbox.messages (message_id, destination, session_id) VALUES ('plain-2', 'orders', 'order-42');
SELECT is((SELECT partition FROM outbox.messages WHERE message_id = 'plain-2'), sqltest.partition_of('order-42', 64),
  'partition hashes the session_id when there is one');

INSERT INTO outbox.messages (message_id, destination, partition) VALUES ('plain-3', 'orders', 9999);
SELECT is((SELECT partition FROM outbox.messages WHERE message_id = 'plain-3'), sqltest.partition_of('plain-3', 64),
  'a supplied partition is overwritten');

INSERT INTO outbox.messages (message_id, destination, session_id)
SELECT 'multi-' || i, 'orders', 'session-' || (i % 3) FROM generate_series(1, 30) i;
SELECT is((SELECT count(DISTINCT partition) FROM outbox.messages WHERE message_id LIKE 'multi-%'),
  (SELECT count(DISTINCT sqltest.partition_of('session-' || i, 64)) FROM generate_series(0, 2) i),
  'multi-row insert: rows of a session share a partition');
SELECT is((SELECT count(*) FROM outbox.messages WHERE message_id LIKE 'multi-%'
             AND partition <> sqltest.partition_of(session_id, 64)), 0::bigint,
  '... the one of their session_id');

INSERT INTO outbox.messages (message_id, destination, due_at) VALUES ('plain-4', 'orders', now() + interval '5 minutes');
SELECT ok((SELECT due_at > created_at FROM outbox.messages WHERE message_id = 'plain-4'), 'a future due_at makes it scheduled');

SELECT lives_ok($$INSERT INTO outbox.messages (message_id, destination) VALUES ('plain-1', 'orders') ON CONFLICT DO NOTHING$$,
  'ON CONFLICT DO NOTHING makes a plain insert idempotent');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination) VALUES ('plain-1', 'orders')$$,
  '23505', NULL, 'a duplicate message_id without ON CONFLICT: 23505');

SELECT throws_ok(format('INSERT INTO outbox.messages (message_id, destination) VALUES (%L, %L)', repeat('m', 129), 'orders'),
  '23514', 'new row for relation "messages" violates check constraint "messages_message_id_valid"', '129-character message_id');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination) VALUES ('', 'orders')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_message_id_valid"', 'empty message_id');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination, session_id) VALUES ('x-1', 'orders', E'a\tb')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_session_id_valid"', 'session_id with a tab');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination) VALUES ('x-2', E'\x7f')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_destination_valid"', 'destination DEL character');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination, headers) VALUES ('x-3', 'orders', '"text"')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_headers_valid"', 'headers not an object');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination, ttl) VALUES ('x-4', 'orders', '-1 second')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_ttl_valid"', 'negative ttl');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination, traceparent) VALUES ('x-5', 'orders', '00-XYZ')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_traceparent_valid"', 'malformed traceparent');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination, status) VALUES ('x-6', 'orders', 'sent')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_status_valid"', 'unknown status');
SELECT throws_ok($$UPDATE outbox.messages SET status = 'dispatched' WHERE message_id = 'plain-1'$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_dispatched_at_set"',
  'dispatched without dispatched_at');
SELECT throws_ok($$UPDATE outbox.messages SET status = 'cancelled' WHERE message_id = 'plain-1'$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_cancelled_at_set"',
  'cancelled without cancelled_at');
SELECT lives_ok($$INSERT INTO outbox.messages (message_id, destination, traceparent)
                  VALUES ('x-7', 'orders', '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future-field')$$,
  'a later traceparent version with an extra field is accepted');

SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination, correlation_id) VALUES ('x-8', 'orders', repeat('c', 129))$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_correlation_id_valid"', 'long correlation_id');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination, parent_message_id) VALUES ('x-9', 'orders', '')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_parent_message_id_valid"', 'empty parent_message_id');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination, originating_message_id) VALUES ('x-10', 'orders', E'a\nb')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_originating_message_id_valid"',
  'originating_message_id with a newline');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination, subject) VALUES ('x-11', 'orders', repeat('s', 257))$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_subject_valid"', 'long subject');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination, content_type) VALUES ('x-12', 'orders', E'text/\x01')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_content_type_valid"',
  'content_type with a control character');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination, due_at) VALUES ('x-13', 'orders', 'infinity')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_due_at_finite"', 'infinite due_at');
SELECT throws_ok($$UPDATE outbox.messages SET attempts = -1 WHERE message_id = 'plain-1'$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_attempts_valid"', 'negative attempts');
SELECT throws_ok($$UPDATE outbox.messages SET partition = -1 WHERE message_id = 'plain-1'$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_partition_valid"', 'negative partition');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination) VALUES ('x-14', 'orders'), ('x-15', E'\x01')$$,
  '23514', 'new row for relation "messages" violates check constraint "messages_destination_valid"',
  'every row of a multi-row insert is checked');

-- The rules are one CHECK calling messages_row_valid(), which raises the
-- error a CHECK of each rule would: clients that read the constraint name
-- from the error fields see the same names.
CREATE FUNCTION pg_temp.violation_fields(command text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
  schema_name text;
  table_name text;
  constraint_name text;
BEGIN
  EXECUTE command;
  RETURN 'no error';
EXCEPTION WHEN check_violation THEN
  GET STACKED DIAGNOSTICS schema_name = SCHEMA_NAME, table_name = TABLE_NAME, constraint_name = CONSTRAINT_NAME;
  RETURN concat_ws(' ', schema_name, table_name, constraint_name);
END
$f$;
SELECT is(pg_temp.violation_fields($$INSERT INTO outbox.messages (message_id, destination, subject) VALUES ('x-16', 'orders', '')$$),
  'outbox messages messages_subject_valid', 'the error names the schema, table and rule');

-- A writer's search_path cannot swap the functions the rules call.
CREATE SCHEMA shadow;
CREATE FUNCTION shadow.length(text) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 0';
SET LOCAL search_path = shadow, pg_catalog, public;
SELECT throws_ok(format('INSERT INTO outbox.messages (message_id, destination) VALUES (%L, %L)', repeat('m', 129), 'orders'),
  '23514', 'new row for relation "messages" violates check constraint "messages_message_id_valid"',
  'a length() earlier on the search_path changes nothing');
SET LOCAL search_path = public;

SELECT * FROM finish();
ROLLBACK;
