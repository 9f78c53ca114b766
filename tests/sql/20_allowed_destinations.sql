-- Plain destination names the DBA allows (016): unset any name, set only those listed; writers and the dispatcher see the same rule.
SELECT sqltest.writer_login('app_a');

BEGIN;
SET search_path = public;
SELECT plan(19);

SELECT is((SELECT allowed_destinations FROM outbox.settings), NULL, 'unset by default');
-- What the insert trigger calls per row: nothing beyond its own test while the list is unset (018).
SET LOCAL track_functions = 'all';
SELECT lives_ok($$SELECT outbox.enqueue('anything-at-all', 'n-1')$$, 'unset: any plain name, as before');
SELECT is((SELECT sum(calls) FROM pg_stat_xact_user_functions WHERE funcname IN ('destination_allowed', 'plain_name_allowed')),
  NULL, 'unset: an insert calls neither destination_allowed() nor plain_name_allowed() (018)');
SELECT is(sqltest.try_login('app_a', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('n-2', 'whatever')$$),
  'ok', 'unset: a plain INSERT of any name too');

UPDATE outbox.settings SET allowed_destinations = '{orders,billing.*}';
SELECT lives_ok($$SELECT outbox.enqueue('orders', 'n-3'), outbox.enqueue('billing.invoices', 'n-4')$$,
  'an exact name, and a name under a prefix');
SELECT cmp_ok((SELECT sum(calls) FROM pg_stat_xact_user_functions WHERE funcname = 'plain_name_allowed'), '>=', 2::numeric,
  'set: each insert of a plain name asks plain_name_allowed() (021)');
SELECT throws_ok($$SELECT outbox.enqueue('orders2', 'n-5')$$, '23514',
  'new row for relation "messages" violates check constraint "messages_destination_valid"',
  'an exact entry is not a prefix: enqueue refuses');
SELECT is(sqltest.try_as('outbox_writer', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('n-6', 'billing')$$),
  '23514', 'a plain INSERT outside the list: 23514');
SELECT is(outbox.destination_problem('audit'), 'a plain destination name must be listed in settings.allowed_destinations',
  'destination_problem says why');
SELECT is(outbox.destination_problem('billing.x'), NULL, '... and nothing for a listed one');
SELECT throws_ok($$SELECT outbox.enqueue('/exchange/amq.rabbitmq.trace', 'n-7')$$, '22023', 'destination must be a plain name',
  'addresses still answer to allowed_address_prefixes');
UPDATE outbox.settings SET allowed_address_prefixes = '{queue://}';
SELECT lives_ok($$SELECT outbox.enqueue('queue://audit', 'n-8')$$, 'an allowed address is not a plain name: not in the list');

UPDATE outbox.settings SET allowed_destinations = '{*}';
SELECT lives_ok($$SELECT outbox.enqueue('audit', 'n-9')$$, '"*" allows every plain name');
UPDATE outbox.settings SET allowed_destinations = '{}';
SELECT throws_ok($$SELECT outbox.enqueue('orders', 'n-10')$$, '23514', NULL, 'an empty list allows no plain name');

SELECT is(sqltest.try_as('outbox_writer', 'UPDATE outbox.settings SET allowed_destinations = ''{x}'''), '42501',
  'writers cannot change the list');
SELECT is((SELECT count(*) FROM outbox.messages WHERE message_id ~ '^n-'), 6::bigint, 'exactly the allowed rows were written');

-- Rows stored before the list: the dispatcher asks, and parks them.
UPDATE outbox.settings SET allowed_destinations = '{orders}';
SELECT is(sqltest.try_as_member('outbox_dispatcher',
  $$SELECT string_agg(message_id || '=' || outbox.destination_allowed(destination), ',' ORDER BY message_id)
      FROM outbox.messages WHERE message_id IN ('n-1', 'n-3', 'n-8')$$), 'ok',
  'the dispatcher may call destination_allowed');
SELECT results_eq($$SELECT message_id, outbox.destination_allowed(destination) FROM outbox.messages
                     WHERE message_id IN ('n-1', 'n-3', 'n-8') ORDER BY 1$$,
  $$VALUES ('n-1', false), ('n-3', true), ('n-8', true)$$, 'an old row outside the list is not allowed; addresses are');
SELECT is(outbox.plain_name_allowed('a', NULL), true, 'a NULL list allows every name');

SELECT * FROM finish();
ROLLBACK;
