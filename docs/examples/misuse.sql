-- What psql shows for each misuse of the outbox: psql -X -q -v ON_ERROR_STOP=0 -f misuse.sql
\set SHOW_CONTEXT never
SELECT outbox.enqueue('orders', 'order-42:placed:1', '{"orderId": 42}'::jsonb);
-- The same id and content again (a retried transaction): the same row id, nothing new.
SELECT outbox.enqueue('orders', 'order-42:placed:1', '{"orderId": 42}'::jsonb);
-- The same id with other content.
SELECT outbox.enqueue('orders', 'order-42:placed:1', '{"orderId": 43}'::jsonb);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- A header value that is not a string, number or boolean: enqueue(), then a plain INSERT.
SELECT outbox.enqueue('orders', 'order-42:placed:2', headers => '{"tenant": {"id": 7}}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
INSERT INTO outbox.messages (message_id, destination, headers)
VALUES ('order-42:placed:2', 'orders', '{"tenant": {"id": 7}}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- A save with a version someone else has saved past.
SELECT workflow.start('order-42', 'order-fulfilment', 'AwaitingInventory');
SELECT workflow.save('order-42', 1, 'AwaitingPayment', NULL);
SELECT workflow.save('order-42', 1, 'Cancelled', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
