-- A message id is its writer's own (029): two writers use the same id, neither takes, probes or poisons the other's; the inbox keys by sender; operators name the writer when an id is shared.
SELECT sqltest.writer_login('app_a');
SELECT sqltest.writer_login('app_b');

BEGIN;
SET search_path = public;
SELECT plan(28);

-- The key: both writers' rows stand ---------------------------------------------------

SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('orders', 'order-43:placed:1', 'a''s real event')$$), 'ok',
  'app_a enqueues order-43:placed:1');
SELECT is(sqltest.try_login('app_b', $$SELECT outbox.enqueue('orders', 'order-43:placed:1', 'b''s junk')$$), 'ok',
  'app_b enqueues the same id: a row of its own');
SELECT is(sqltest.try_login('app_b', $$SELECT outbox.enqueue('orders', 'order-44:placed:1', 'b first')$$), 'ok',
  'app_b takes an id app_a will use ...');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('orders', 'order-44:placed:1', 'a''s real event')$$), 'ok',
  '... and app_a''s own business transaction still succeeds');
SELECT is(sqltest.try_login('app_a', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('order-45', 'orders')$$),
  'ok', 'a plain INSERT by app_a ...');
SELECT is(sqltest.try_login('app_b', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('order-45', 'orders')
                                       ON CONFLICT DO NOTHING$$), 'ok', '... and by app_b with ON CONFLICT DO NOTHING');
SELECT results_eq($$SELECT writer || ': ' || convert_from(body, 'UTF8') COLLATE "default" FROM outbox.messages
                     WHERE message_id IN ('order-43:placed:1', 'order-44:placed:1') ORDER BY message_id, writer$$,
  $$VALUES ('app_a: a''s real event'), ('app_b: b''s junk'), ('app_a: a''s real event'), ('app_b: b first')$$,
  'each writer''s row carries its own content');
SELECT is((SELECT count(*) FROM outbox.messages WHERE message_id = 'order-45'), 2::bigint,
  'app_b''s ON CONFLICT DO NOTHING inserted its row instead of dropping it');

-- No probe: app_b's answer does not depend on app_a's ids -------------------------------

SELECT is(sqltest.try_login('app_b', $$SELECT outbox.enqueue('orders', 'order-43:placed:1', 'other')$$),
  '23505: message_id "order-43:placed:1" already exists with different content',
  'app_b conflicts with its own row only ...');
SELECT is(sqltest.try_login('app_b', $$SELECT outbox.enqueue('orders', 'order-46', 'x');
                                       SELECT outbox.enqueue('orders', 'order-46', 'y')$$),
  '23505: message_id "order-46" already exists with different content',
  '... exactly as for an id app_a never used');
SELECT is(sqltest.ask_login('app_a', $$SELECT outbox.enqueue('orders', 'order-44:placed:1', 'a''s real event')::text$$),
  (SELECT id::text FROM outbox.messages WHERE message_id = 'order-44:placed:1' AND writer = 'app_a'),
  'enqueue() stays idempotent for app_a where app_b wrote the id first: the same content returns app_a''s row');
SELECT is(sqltest.ask_login('app_b', $$SELECT outbox.enqueue('orders', 'order-44:placed:1', 'b first')::text$$),
  (SELECT id::text FROM outbox.messages WHERE message_id = 'order-44:placed:1' AND writer = 'app_b'),
  '... and for app_b: each compares its own row, whichever comes first');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('orders', 'timeout-1', due_at => now() + interval '1 hour')$$),
  'ok', 'both writers schedule timeout-1 ...');
SELECT is(sqltest.ask_login('app_b', $$SELECT (outbox.enqueue('orders', 'timeout-1', due_at => now() + interval '1 hour')
                                         IS NOT NULL AND outbox.cancel('timeout-1'))::text$$), 'true',
  '... cancel() by app_b cancels its own row ...');
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'timeout-1' AND writer = 'app_a'), 'pending',
  '... never app_a''s');

-- The inbox keys by sender ------------------------------------------------------------

SELECT is(sqltest.ask_login('app_a', $$SELECT outbox.record_received('orders-svc', 'order-43:placed:1', 'app_b')::text$$),
  'true', 'a consumer records app_b''s order-43:placed:1 ...');
SELECT is(sqltest.ask_login('app_a', $$SELECT outbox.record_received('orders-svc', 'order-43:placed:1', 'app_a')::text$$),
  'true', '... and app_a''s real one later is not a duplicate');
SELECT is(sqltest.ask_login('app_a', $$SELECT outbox.record_received('orders-svc', 'order-43:placed:1', 'app_a')::text$$),
  'false', '... its redelivery is');
SELECT is(sqltest.try_login('app_a', $$SELECT workflow.start('order-43', 'order', 'Placed')$$), 'ok',
  'app_a''s workflow order-43 ...');
SELECT is(sqltest.ask_login('app_a', $$SELECT workflow.record_processed('order-43', 'payment:43:ok', 'app_b')::text$$),
  'true', '... processes app_b''s payment:43:ok ...');
SELECT is(sqltest.ask_login('app_a', $$SELECT workflow.record_processed('order-43', 'payment:43:ok', 'app_a')::text$$),
  'true', '... and app_a''s own later: its processed ids key by sender too ...');
SELECT is(sqltest.ask_login('app_a', $$SELECT workflow.record_processed('order-43', 'payment:43:ok', 'app_a')::text$$),
  'false', '... and its redelivery is a duplicate');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.record_received('orders-svc', 'x', '')$$),
  '22023: sender must be 1..128 characters without control characters [got 0 characters]', 'the sender is required in the three-argument form');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('orders', 'h-1', headers => '{"outboxd_writer": "app_a"}')$$),
  '22023: headers must be a JSON object whose values are strings, numbers, booleans or null '
  '[key "outboxd_writer": reserved for outboxd''s own properties]', 'a writer cannot set the outboxd_writer property itself');

-- Operators name the writer when an id is shared ----------------------------------------

UPDATE outbox.messages SET status = 'parked', last_error = 'rejected' WHERE message_id = 'order-43:placed:1';
SELECT is(sqltest.try_as('outbox_dispatcher', $$SELECT outbox.skip_parked('{order-43:placed:1}')$$), '21000',
  'skip by an id two writers use: refused');
SELECT is(sqltest.try_as('outbox_dispatcher', $$SELECT outbox.requeue_parked(NULL, 'none', writer => 'app_a')$$), 'ok',
  'requeue naming the writer is taken');
SELECT results_eq($$SELECT * FROM outbox.skip_parked('{order-43:placed:1}', writer => 'app_b')$$,
  $$VALUES ('order-43:placed:1')$$, 'skip naming app_b ...');
SELECT results_eq($$SELECT writer || ' ' || status FROM outbox.messages WHERE message_id = 'order-43:placed:1'
                     ORDER BY writer$$,
  $$VALUES ('app_a parked'), ('app_b cancelled')$$, '... gives up app_b''s row alone');

SELECT * FROM finish();
ROLLBACK;
