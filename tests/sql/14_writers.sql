-- Writers are separate trust domains, and what the SQL accepts is sendable: owners, conflicts, cancel, header and destination rules.
SELECT sqltest.writer_login('app_a');
SELECT sqltest.writer_login('app_b');

BEGIN;
SET search_path = public;
SELECT plan(43);

-- The shared table of header cases (tests/acceptance/headers.tsv), also run
-- against the daemon's mapper by tests/unit/amqp/headers_acceptance_test.cpp.
\set cases `cat "$OUTBOXD_SQLTEST_ROOT/tests/acceptance/headers.tsv"`
CREATE TEMP TABLE header_cases AS
SELECT split_part(line, E'\t', 1) = 'accept' AS accept, split_part(line, E'\t', 2) AS document,
       split_part(line, E'\t', 3) AS why
  FROM regexp_split_to_table(:'cases', E'\n') AS line
 WHERE line <> '' AND line !~ '^#';

-- Owners -------------------------------------------------------------------------

SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('orders', 'a-1', 'secret of a',
                                             due_at => now() + interval '1 hour')$$), 'ok', 'app_a enqueues a timeout');
SELECT is(sqltest.try_login('app_a', $$INSERT INTO outbox.messages (message_id, destination, due_at)
                                       VALUES ('a-2', 'orders', now() + interval '1 hour')$$), 'ok',
  'app_a writes a plain INSERT');
SELECT results_eq($$SELECT message_id, writer FROM outbox.messages WHERE message_id IN ('a-1', 'a-2') ORDER BY 1$$,
  $$VALUES ('a-1', 'app_a'), ('a-2', 'app_a')$$, 'both rows record their writer, the login role');
SELECT is(sqltest.try_login('app_a', $$INSERT INTO outbox.messages (message_id, destination, writer) VALUES ('a-3', 'orders', 'app_b')$$),
  '42501: permission denied for table messages', 'a writer cannot choose the writer column');
SELECT is(sqltest.try_login('app_a', $$SET ROLE outbox_writer; SELECT outbox.enqueue('orders', 'a-4', 'x')$$), 'ok',
  'SET ROLE in between ...');
SELECT is((SELECT writer FROM outbox.messages WHERE message_id = 'a-4'), 'app_a', '... does not change the writer');

-- Conflicts say nothing about the other row -------------------------------------

SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('orders', 'a-1', 'secret of a', due_at => (
                                         SELECT now() + interval '1 hour'))$$),
  '23505: message_id "a-1" already exists with different content',
  'own row, different due_at: 23505 without DETAIL');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('orders', 'a-1', 'other body')$$),
  '23505: message_id "a-1" already exists with different content', 'own row, different body: the same error');
SELECT is(sqltest.try_login('app_b', $$SELECT outbox.enqueue('orders', 'a-1', 'secret of a')$$), 'ok',
  'another writer''s id: app_b''s own row, nothing learnt about app_a''s (ids are per writer)');
SELECT is(sqltest.try_login('app_b', $$SELECT outbox.enqueue('orders', 'a-1', 'guess')$$),
  '23505: message_id "a-1" already exists with different content', '... and a conflict only with its own row');
SELECT is(sqltest.ask_login('app_a', $$SELECT outbox.enqueue('orders', 'a-4', 'x')::text$$),
  (SELECT id::text FROM outbox.messages WHERE message_id = 'a-4'), 'own row, same content: its id (idempotent)');
SELECT isnt(sqltest.ask_login('app_b', $$SELECT outbox.enqueue('orders', 'a-4', 'x')::text$$),
  (SELECT id::text FROM outbox.messages WHERE message_id = 'a-4' AND writer = 'app_a'),
  'the same call by another writer: a row of its own');

-- cancel sees only the caller's rows ---------------------------------------------

SELECT is(sqltest.ask_login('app_b', $$SELECT outbox.cancel('a-1')::text$$), 'false', 'app_b cannot cancel app_a''s timeout');
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'a-1' AND writer = 'app_a'), 'pending',
  '... it stays pending');
SELECT is(sqltest.ask_login('app_b', $$SELECT outbox.cancel('no-such-id')::text$$), 'false',
  '... the same answer as for an unknown id');
SELECT is(sqltest.ask_login('app_a', $$SELECT outbox.cancel('a-2')::text$$), 'true', 'app_a cancels its own plain-INSERT row');
SELECT is(sqltest.try_login('app_b', 'SELECT count(*) FROM outbox.messages'), '42501: permission denied for table messages',
  'writers still cannot read rows');

-- Rows from before 009 belong to no writer
INSERT INTO outbox.messages (message_id, destination, due_at, writer) VALUES ('legacy-1', 'orders', now() + interval '1 hour', NULL);
SELECT is(outbox.cancel('legacy-1'), false, 'a row without writer: no one''s to cancel');
SELECT throws_ok($$INSERT INTO outbox.messages (message_id, destination, writer) VALUES ('legacy-1', 'orders', NULL)$$,
  '23505', NULL, '... and rows of no writer keep one namespace of their own');

-- Headers: the shared table ------------------------------------------------------

SELECT is_empty($$SELECT document, why FROM header_cases
                   WHERE accept <> (outbox.headers_problem(document::jsonb) IS NULL)$$,
  'headers_problem() decides every case of tests/acceptance/headers.tsv as the table says');
SELECT ok((SELECT count(*) FROM header_cases) > 30, 'the table has its cases');
SELECT is_empty($$SELECT document, why FROM header_cases WHERE NOT accept AND NOT outbox.headers_suspect(document::jsonb)$$,
  'headers_suspect(), the quick look that spares the check, flags every refused document');
SELECT ok(NOT outbox.headers_suspect('{"tenant": "acme", "priority": 5, "urgent": true, "note": null, "ratio": 0.5}'),
  '... and not ordinary ones');
SELECT is_empty($$SELECT document, why FROM header_cases c
                   WHERE c.accept <> (sqltest.try_as('outbox_writer', format(
                     'SELECT outbox.enqueue(%L, %L, headers => %L)', 'orders', 'h-' || md5(c.document), c.document)) = 'ok')$$,
  'enqueue() accepts and refuses the same documents');
SELECT is_empty($$SELECT document, why FROM header_cases c
                   WHERE c.accept <> (sqltest.try_as('outbox_writer', format(
                     'INSERT INTO outbox.messages (message_id, destination, headers) VALUES (%L, %L, %L)',
                     'i-' || md5(c.document), 'orders', c.document)) = 'ok')$$,
  'a plain INSERT accepts and refuses the same documents');

SELECT throws_ok($$SELECT outbox.enqueue('orders', 'h-x', headers => '{"a": [1, 2]}')$$, '22023',
  'headers must be a JSON object whose values are strings, numbers, booleans or null', 'enqueue: 22023 ...');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('orders', 'h-y', headers => '{"a\u001b[2J": 1}')$$),
  '22023: headers must be a JSON object whose values are strings, numbers, booleans or null '
  '[key "a\u001b[2J": keys are 1..128 characters without control characters]',
  '... the DETAIL names the rule and shows the key escaped');
SELECT is(sqltest.try_login('app_a', $$INSERT INTO outbox.messages (message_id, destination, headers)
                                       VALUES ('h-z', 'orders', '{"_AMQ_SCHED_DELIVERY": 1}')$$),
  '23514: new row for relation "messages" violates check constraint "messages_headers_valid" '
  '[key "_AMQ_SCHED_DELIVERY": reserved by the AMQP specification or a broker]',
  'plain INSERT: 23514 naming messages_headers_valid');
SELECT is(outbox.headers_problem('{"n": 1e400}'), 'key "n": integers must fit a signed 64-bit long', '1e400 is an integer too large');
SELECT is(outbox.headers_problem('{"n": 18446744073709551616}'), 'key "n": integers must fit a signed 64-bit long',
  'an integer beyond 2^64 does not become a double');
SELECT is(outbox.headers_problem('{"n": null}'), NULL, 'null is allowed (an AMQP null)');

-- Destinations -------------------------------------------------------------------

SELECT throws_ok($$SELECT outbox.enqueue('/exchange/amq.rabbitmq.trace', 'd-1')$$, '22023', 'destination must be a plain name',
  'a full address ("/...") is refused by default');
SELECT throws_ok($$SELECT outbox.enqueue('queue://orders', 'd-2')$$, '22023', 'destination must be a plain name',
  'a full address ("scheme://...") is refused by default');
SELECT throws_ok($$SELECT outbox.enqueue('activemq.management', 'd-3')$$, '22023', 'destination must be a plain name',
  'Artemis management address: refused');
SELECT throws_ok($$SELECT outbox.enqueue('amq.rabbitmq.reply-to', 'd-4')$$, '22023', 'destination must be a plain name',
  'RabbitMQ amq. name: refused');
SELECT throws_ok($$SELECT outbox.enqueue('$management', 'd-5')$$, '22023', 'destination must be a plain name',
  'Azure $management: refused');
SELECT is(sqltest.try_as('outbox_writer', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('d-6', '/queue/x')$$),
  '23514', 'plain INSERT of a full address: 23514');
SELECT lives_ok($$SELECT outbox.enqueue('orders.eu/west', 'd-7'), outbox.enqueue('billing-v2.invoices', 'd-8')$$,
  'plain names, also with a slash or dots inside');
UPDATE outbox.settings SET allowed_address_prefixes = '{/exchange/events/,queue://}';
SELECT lives_ok($$SELECT outbox.enqueue('/exchange/events/orders.created', 'd-9'), outbox.enqueue('queue://orders', 'd-10')$$,
  'addresses under a prefix the DBA allowed');
SELECT throws_ok($$SELECT outbox.enqueue('/exchange/amq.rabbitmq.trace', 'd-11')$$, '22023', NULL,
  '... and still not others');
SELECT is(sqltest.try_as('outbox_writer', 'UPDATE outbox.settings SET allowed_address_prefixes = ''{/}'''), '42501',
  'writers cannot change the allowed prefixes');
SELECT is((SELECT count(*) FROM outbox.messages WHERE message_id ~ '^d-'), 4::bigint, 'exactly the allowed destinations were written');

-- The rules apply to new rows only: a dispatcher can still park an old one.
ALTER TABLE outbox.messages DISABLE TRIGGER messages_set_partition;
INSERT INTO outbox.messages (message_id, destination, headers) VALUES ('old-1', 'orders', '{"a": [1]}');
ALTER TABLE outbox.messages ENABLE TRIGGER messages_set_partition;
SELECT is(sqltest.try_as('outbox_dispatcher', $$UPDATE outbox.messages SET status = 'parked', attempts = 1,
                                                last_error = 'headers' WHERE message_id = 'old-1'$$), 'ok',
  'a row stored before the rules can be parked');

SELECT * FROM finish();
ROLLBACK;
