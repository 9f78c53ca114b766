-- workflow.emit: a workflow's messages carry its session, correlation and originating ids from the state record.
BEGIN;
SET search_path = public;
SELECT plan(12);

SELECT workflow.start('order-42', 'order', 'AwaitingPayment', correlation_id => 'c-42',
                      originating_message_id => 'order-42:placed') AS started \gset

SELECT workflow.emit('order-42', 'stock', 'order-42:reserve-stock:1', '{"quantity": 1}'::jsonb,
                     subject => 'ReserveStock', parent_message_id => 'order-42:placed') AS reserve_id \gset
SELECT results_eq(format($$SELECT destination, session_id, correlation_id, originating_message_id, parent_message_id,
                                  subject, content_type, body, due_at <= created_at
                             FROM outbox.messages WHERE id = %s$$, :reserve_id),
  $$VALUES ('stock', 'order-42', 'c-42', 'order-42:placed', 'order-42:placed', 'ReserveStock', 'application/json',
            convert_to('{"quantity": 1}', 'UTF8'), true)$$,
  'emit (jsonb): session, correlation and originating ids from the state record');
SELECT is(workflow.emit('order-42', 'stock', 'order-42:reserve-stock:1', '{"quantity": 1}'::jsonb,
                        subject => 'ReserveStock', parent_message_id => 'order-42:placed'), :reserve_id::bigint,
  '... the same message again: the same row');
SELECT throws_ok($$SELECT workflow.emit('order-42', 'stock', 'order-42:reserve-stock:1', '{"quantity": 2}'::jsonb,
                                        subject => 'ReserveStock', parent_message_id => 'order-42:placed')$$,
  '23505', 'message_id "order-42:reserve-stock:1" already exists with different content', '... different content: 23505');

SELECT workflow.emit('order-42', 'audit', 'order-42:note:1', 'plain') AS note_id \gset
SELECT results_eq(format('SELECT body, content_type FROM outbox.messages WHERE id = %s', :note_id),
  $$VALUES (convert_to('plain', 'UTF8'), NULL::text)$$, 'emit (text): UTF-8 bytes, no content type');
SELECT workflow.emit('order-42', 'audit', 'order-42:raw:1', '\x00ff'::bytea, content_type => 'application/octet-stream',
                     headers => '{"tenant": "acme"}') AS raw_id \gset
SELECT results_eq(format('SELECT body, content_type, headers FROM outbox.messages WHERE id = %s', :raw_id),
  $$VALUES ('\x00ff'::bytea, 'application/octet-stream', '{"tenant": "acme"}'::jsonb)$$, 'emit (bytea), headers');
SELECT workflow.emit('order-42', 'stock', 'order-42:later:1', '{}'::jsonb, due_at => now() + interval '1 hour') AS later_id \gset
SELECT is((SELECT due_at FROM outbox.messages WHERE id = :later_id), now() + interval '1 hour', 'emit: due_at schedules it');

SELECT workflow.start('order-43', 'order', 'New') AS started43 \gset
SELECT workflow.emit('order-43', 'stock', 'order-43:reserve-stock:1', '{}'::jsonb) AS bare_id \gset
SELECT results_eq(format('SELECT session_id, correlation_id, originating_message_id FROM outbox.messages WHERE id = %s', :bare_id),
  $$VALUES ('order-43', NULL::text, NULL::text)$$, 'emit: a workflow without correlation ids gives only the session');

SELECT throws_ok($$SELECT workflow.emit('no-such-workflow', 'stock', 'x-1', '{}'::jsonb)$$,
  'P0002', 'workflow "no-such-workflow" does not exist', 'emit for a missing workflow');
SELECT throws_ok($$SELECT workflow.emit('order-42', 'stock', '', '{}'::jsonb)$$,
  '22023', 'message_id must be 1..128 characters without control characters', 'emit validates like enqueue');

SELECT is(sqltest.try_as('outbox_writer', $$SELECT workflow.emit('order-42', 'stock', 'w-1', '{}'::jsonb)$$), 'ok',
  'writer: emit');
SELECT is(sqltest.try_as('outbox_dispatcher', $$SELECT workflow.emit('order-42', 'stock', 'd-1', '{}'::jsonb)$$), '42501',
  'dispatcher: no emit');
SELECT is(sqltest.try_as('outbox_writer', $$SELECT workflow.emit('order-42', 'stock', 'w-2', 'x')$$), 'ok',
  'writer: emit (text)');

SELECT * FROM finish();
ROLLBACK;
