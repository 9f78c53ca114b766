-- The inbox of consumers that are not workflows: record_received, purge_received, and who may call them.
BEGIN;
SET search_path = public;
SELECT plan(17);

SELECT is(outbox.record_received('stock', 'order-42:reserve-stock:1'), true, 'record_received: true the first time');
SELECT is(outbox.record_received('stock', 'order-42:reserve-stock:1'), false, '... false for a duplicate');
SELECT is(outbox.record_received('payments', 'order-42:reserve-stock:1'), true, '... per consumer');
SELECT is((SELECT received_at FROM outbox.received_messages WHERE consumer = 'stock'), now(), '... stamped received_at');
SELECT throws_ok(format('SELECT outbox.record_received(%L, %L)', 'stock', repeat('m', 129)),
  '22023', 'message_id must be 1..128 characters without control characters', 'the message id is validated');
SELECT throws_ok($$SELECT outbox.record_received(NULL, 'm-1')$$, '22023', 'consumer is required', 'a consumer is required');
SELECT throws_ok($$SELECT outbox.record_received(E'st\nock', 'm-1')$$,
  '22023', 'consumer must be 1..128 characters without control characters', 'the consumer is validated');
SELECT throws_ok($$INSERT INTO outbox.received_messages (consumer, message_id) VALUES ('stock', '')$$,
  '23514', 'new row for relation "received_messages" violates check constraint "received_messages_message_id_valid"',
  'the CHECK guards direct inserts');

INSERT INTO outbox.received_messages (consumer, message_id, received_at)
SELECT 'stock', 'old-' || i, now() - interval '30 days' + i * interval '1 minute' FROM generate_series(1, 5) i;
SELECT is(outbox.purge_received('7 days', 3), 3, 'purge_received deletes one batch');
SELECT is(outbox.purge_received('7 days', 3), 2, '... and the rest');
SELECT is(outbox.purge_received('7 days', 3), 0, '... then nothing');
SELECT is((SELECT count(*) FROM outbox.received_messages), 2::bigint, 'recent ids are kept');
SELECT throws_ok($$SELECT outbox.purge_received('-1 day')$$, '22023', 'older_than must not reach into the future',
  'negative retention');

SELECT is(sqltest.try_as('outbox_writer', $q$DO $d$ BEGIN
            IF NOT outbox.record_received('stock', 'w-1') OR outbox.record_received('stock', 'w-1') THEN
              RAISE 'wrong answer';
            END IF; END $d$$q$), 'ok', 'writer: record_received');
SELECT is(sqltest.try_as('outbox_writer', $$SELECT outbox.purge_received('1 day')$$), 'ok', 'writer: purge_received');
SELECT is(sqltest.try_as('outbox_dispatcher', $$SELECT outbox.record_received('stock', 'd-1')$$), '42501',
  'dispatcher: no inbox');
SELECT is(sqltest.try_as('outbox_dispatcher', 'SELECT count(*) FROM outbox.received_messages'), '42501',
  'dispatcher: cannot read the inbox');

SELECT * FROM finish();
ROLLBACK;
