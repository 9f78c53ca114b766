-- outbox.enqueue(): the three body overloads, named parameters, idempotency on message_id, field validation.
BEGIN;
SET search_path = public;
SELECT plan(58);

-- Overloads --------------------------------------------------------------------

SELECT isnt(outbox.enqueue('orders', 'no-body'), NULL, 'without a body the bytea overload applies');
SELECT is((SELECT body FROM outbox.messages WHERE message_id = 'no-body'), '\x'::bytea, '... with an empty body');

SELECT lives_ok($$SELECT outbox.enqueue('orders', 'bytea-1', '\x00ff'::bytea)$$, 'bytea body');
SELECT is((SELECT body FROM outbox.messages WHERE message_id = 'bytea-1'), '\x00ff'::bytea, '... stored as given');

SELECT lives_ok($$SELECT outbox.enqueue('orders', 'untyped-1', '\x41')$$, 'untyped literal body');
SELECT is((SELECT body FROM outbox.messages WHERE message_id = 'untyped-1'), convert_to('\x41', 'UTF8'),
  '... picks the text overload (4 characters, not the byte 0x41)');

SELECT lives_ok($$SELECT outbox.enqueue('orders', 'text-1', 'grüße'::text)$$, 'text body');
SELECT is((SELECT body FROM outbox.messages WHERE message_id = 'text-1'), '\x6772c3bc c39f65'::bytea,
  '... stored as UTF-8 bytes');
SELECT is((SELECT content_type FROM outbox.messages WHERE message_id = 'text-1'), NULL, '... with no content_type');

SELECT lives_ok($$SELECT outbox.enqueue('orders', 'json-1', '{"b": [1, 2], "a": "x"}'::jsonb)$$, 'jsonb body');
SELECT is((SELECT convert_from(body, 'UTF8') FROM outbox.messages WHERE message_id = 'json-1'),
  '{"a": "x", "b": [1, 2]}', '... stored as the text of the jsonb');
SELECT is((SELECT content_type FROM outbox.messages WHERE message_id = 'json-1'), 'application/json',
  '... content_type defaults to application/json');
SELECT lives_ok($$SELECT outbox.enqueue('orders', 'json-2', '{}'::jsonb, content_type => 'application/cloudevents+json')$$,
  'jsonb body with a content_type');
SELECT is((SELECT content_type FROM outbox.messages WHERE message_id = 'json-2'), 'application/cloudevents+json',
  '... keeps the given content_type');

SELECT lives_ok($$SELECT outbox.enqueue('orders', 'varchar-1', 'v'::varchar)$$, 'a varchar body resolves to the text overload');

-- Named parameters --------------------------------------------------------------

SELECT lives_ok($$
  SELECT outbox.enqueue(
    destination => 'payments',
    message_id => 'order-42:capture-payment:1',
    body => '{"amount": 249}'::jsonb,
    session_id => 'order-42',
    correlation_id => '71db97f2a3f54b72b0d73c665ce86fd7',
    parent_message_id => 'order-42:inventory-reserved:1',
    originating_message_id => 'orders:order-placed:42',
    subject => 'CapturePayment',
    headers => '{"tenant": "acme", "priority": 5, "urgent": true, "note": null}',
    ttl => '10 minutes',
    traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    due_at => now() + interval '1 hour')$$,
  'every parameter by name');
SELECT results_eq($$
  SELECT destination, session_id, correlation_id, parent_message_id, originating_message_id, subject,
         content_type, headers, ttl, traceparent, due_at, status, attempts, created_at
    FROM outbox.messages WHERE message_id = 'order-42:capture-payment:1'$$,
  $$VALUES ('payments', 'order-42', '71db97f2a3f54b72b0d73c665ce86fd7', 'order-42:inventory-reserved:1',
            'orders:order-placed:42', 'CapturePayment', 'application/json',
            '{"tenant": "acme", "priority": 5, "urgent": true, "note": null}'::jsonb, interval '10 minutes',
            '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', now() + interval '1 hour', 'pending', 0, now())$$,
  '... all stored');
SELECT is((SELECT due_at FROM outbox.messages WHERE message_id = 'bytea-1'), now(), 'due_at NULL means now()');
SELECT lives_ok($$SELECT outbox.enqueue(message_id => 'named-2', body => 'b', destination => 'orders')$$,
  'named parameters in any order');

-- Idempotency -------------------------------------------------------------------

SELECT is(outbox.enqueue('orders', 'bytea-1', '\x00ff'::bytea),
          (SELECT id FROM outbox.messages WHERE message_id = 'bytea-1'), 'same bytea content: the existing id');
SELECT is(outbox.enqueue('orders', 'text-1', 'grüße'), (SELECT id FROM outbox.messages WHERE message_id = 'text-1'),
  'same text content: the existing id');
SELECT is(outbox.enqueue('orders', 'json-1', '{"a": "x", "b": [1, 2]}'::jsonb),
          (SELECT id FROM outbox.messages WHERE message_id = 'json-1'), 'same jsonb content: the existing id');
SELECT is(outbox.enqueue(
    destination => 'payments', message_id => 'order-42:capture-payment:1', body => '{"amount": 249}'::jsonb,
    session_id => 'order-42', correlation_id => '71db97f2a3f54b72b0d73c665ce86fd7',
    parent_message_id => 'order-42:inventory-reserved:1', originating_message_id => 'orders:order-placed:42',
    subject => 'CapturePayment', headers => '{"note": null, "urgent": true, "priority": 5, "tenant": "acme"}',
    ttl => '600 seconds', traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    due_at => now() + interval '60 minutes'),
  (SELECT id FROM outbox.messages WHERE message_id = 'order-42:capture-payment:1'),
  'same content written differently (key order, interval units): the existing id');
SELECT is(outbox.enqueue(destination => 'payments', message_id => 'order-42:capture-payment:1',
    body => '{"amount": 249}'::jsonb, session_id => 'order-42', correlation_id => '71db97f2a3f54b72b0d73c665ce86fd7',
    parent_message_id => 'order-42:inventory-reserved:1', originating_message_id => 'orders:order-placed:42',
    subject => 'CapturePayment', headers => '{"tenant": "acme", "priority": 5, "urgent": true, "note": null}',
    ttl => '10 minutes', traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'),
  (SELECT id FROM outbox.messages WHERE message_id = 'order-42:capture-payment:1'),
  'due_at left out is not compared');
SELECT is((SELECT count(*) FROM outbox.messages WHERE message_id IN ('bytea-1', 'text-1', 'json-1', 'order-42:capture-payment:1')),
  4::bigint, 'repeats inserted nothing');

SELECT throws_ok($$SELECT outbox.enqueue('orders', 'bytea-1', '\x00fe'::bytea)$$,
  '23505', 'message_id "bytea-1" already exists with different content', 'different body: 23505 naming the message_id');
SELECT throws_ok($$SELECT outbox.enqueue('invoices', 'bytea-1', '\x00ff'::bytea)$$,
  '23505', NULL, 'different destination: 23505');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 'bytea-1', '\x00ff'::bytea, session_id => 's')$$,
  '23505', NULL, 'a session_id the first call did not give: 23505');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 'bytea-1', '\x00ff'::bytea, headers => '{"a": 1}')$$,
  '23505', NULL, 'different headers: 23505');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 'bytea-1', '\x00ff'::bytea, due_at => now() + interval '1 s')$$,
  '23505', NULL, 'a different explicit due_at: 23505');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 'json-1', '{"a": "y"}'::jsonb)$$,
  '23505', NULL, 'different jsonb body: 23505');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 'json-1', '{"a": "x", "b": [1, 2]}')$$,
  '23505', NULL, 'same text but as a text body (no content_type): 23505');

-- The DETAIL and HINT of a failed call, NULL if it succeeds.
CREATE FUNCTION pg_temp.detail_and_hint(command text) RETURNS text[] LANGUAGE plpgsql AS $f$
DECLARE
  detail text;
  hint text;
BEGIN
  EXECUTE command;
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
  RETURN ARRAY[detail, hint];
END $f$;
SELECT is(pg_temp.detail_and_hint($$SELECT outbox.enqueue('orders', 'bytea-1', '\x00fe'::bytea)$$),
  ARRAY['', 'A message_id names one message: retry with the same content, or use a new id.'],
  'a conflict says what to do and nothing of the existing row''s content (it may be another writer''s)');

-- Validation --------------------------------------------------------------------

SELECT throws_ok(format('SELECT outbox.enqueue(%L, %L)', 'orders', repeat('m', 129)),
  '22023', 'message_id must be 1..128 characters without control characters', '129-character message_id');
SELECT lives_ok(format('SELECT outbox.enqueue(%L, %L)', 'orders', repeat('m', 128)), '128-character message_id');
SELECT throws_ok($$SELECT outbox.enqueue('orders', E'order-1\t')$$,
  '22023', 'message_id must be 1..128 characters without control characters', 'message_id with a control character');
SELECT throws_ok($$SELECT outbox.enqueue('orders', '')$$,
  '22023', 'message_id must be 1..128 characters without control characters', 'empty message_id');
SELECT throws_ok($$SELECT outbox.enqueue('orders', NULL)$$, '22023', 'message_id is required', 'NULL message_id');
SELECT throws_ok(format('SELECT outbox.enqueue(%L, %L)', repeat('d', 257), 'd-1'),
  '22023', 'destination must be 1..256 characters without control characters', '257-character destination');
SELECT throws_ok($$SELECT outbox.enqueue(E'orders\n', 'd-2')$$,
  '22023', 'destination must be 1..256 characters without control characters', 'destination with a newline');
SELECT throws_ok(format('SELECT outbox.enqueue(%L, %L, session_id => %L)', 'orders', 's-1', repeat('s', 129)),
  '22023', 'session_id must be 1..128 characters without control characters', '129-character session_id');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 's-2', session_id => '')$$,
  '22023', 'session_id must be 1..128 characters without control characters', 'empty session_id');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 'c-1', correlation_id => E'a\x01b')$$,
  '22023', 'correlation_id must be 1..128 characters without control characters', 'correlation_id with a control character');
SELECT throws_ok(format('SELECT outbox.enqueue(%L, %L, parent_message_id => %L)', 'orders', 'p-1', repeat('p', 129)),
  '22023', 'parent_message_id must be 1..128 characters without control characters', '129-character parent_message_id');
SELECT throws_ok(format('SELECT outbox.enqueue(%L, %L, originating_message_id => %L)', 'orders', 'o-1', repeat('o', 129)),
  '22023', 'originating_message_id must be 1..128 characters without control characters', '129-character originating_message_id');
SELECT throws_ok(format('SELECT outbox.enqueue(%L, %L, subject => %L)', 'orders', 'su-1', repeat('s', 257)),
  '22023', 'subject must be 1..256 characters without control characters', '257-character subject');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 'ct-1', content_type => E'text/plain\r')$$,
  '22023', 'content_type must be 1..256 characters without control characters', 'content_type with a control character');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 'h-1', headers => '[1]')$$,
  '22023', 'headers must be a JSON object whose values are strings, numbers, booleans or null', 'headers not an object');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 'h-2', headers => '{"a": {"b": 1}}')$$,
  '22023', 'headers must be a JSON object whose values are strings, numbers, booleans or null', 'nested headers');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 't-1', ttl => '0 seconds')$$,
  '22023', 'ttl must be between 1 millisecond and 4294967295 milliseconds', 'zero ttl');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 't-2', ttl => '50 days')$$,
  '22023', 'ttl must be between 1 millisecond and 4294967295 milliseconds', 'ttl beyond the AMQP range');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 'tp-1', traceparent => 'not-a-traceparent')$$,
  '22023', 'traceparent must be a W3C traceparent (version-traceid-parentid-flags in lowercase hex, at most 256 characters)',
  'malformed traceparent');
SELECT throws_ok(format($$SELECT outbox.enqueue('orders', 'tp-2', traceparent => %L)$$,
                        '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-' || repeat('a', 201)),
  '22023', NULL, 'a traceparent of 257 characters');
SELECT throws_ok($$SELECT outbox.enqueue('orders', 'due-1', due_at => 'infinity')$$,
  '22023', 'due_at must be finite', 'infinite due_at');
SELECT is(pg_temp.detail_and_hint($$SELECT outbox.enqueue('orders', 's-2', session_id => repeat('s', 129))$$),
  ARRAY['got 129 characters', ''], 'a bad field: the DETAIL says what was given');
SELECT is((SELECT count(*) FROM outbox.messages WHERE message_id ~ '^(d|s|c|p|o|su|ct|h|t|tp|due)-[0-9]$'), 0::bigint,
  'rejected calls inserted nothing');

-- Caller's search_path ----------------------------------------------------------

CREATE SCHEMA decoy;
CREATE TABLE decoy.messages (id bigint, message_id text);
CREATE TABLE decoy.instances (idle boolean);
INSERT INTO decoy.instances VALUES (true);
SET LOCAL search_path = decoy, public;  -- pgTAP itself needs public
SELECT lives_ok($$SELECT outbox.enqueue('orders', 'path-1', 'x')$$, 'works when the caller''s search_path shadows its tables');
SET LOCAL search_path = public;
SELECT is((SELECT count(*) FROM outbox.messages WHERE message_id = 'path-1') + (SELECT count(*) FROM decoy.messages),
  1::bigint, '... and wrote to outbox.messages only');

SELECT * FROM finish();
ROLLBACK;
