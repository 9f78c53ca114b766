-- Destinations in Latin-1 when the DBA asks (021): refused when written, by enqueue() and a plain INSERT alike, and stored ones not allowed to the dispatcher.
SELECT sqltest.writer_login('app_a');
-- Committed, so that the writer's own sessions (sqltest.try_login) see them.
UPDATE outbox.settings
   SET destination_charset = 'latin1', allowed_destinations = '{billing.*,café}', allowed_address_prefixes = '{/queue/}';

BEGIN;
SET search_path = public;
SELECT plan(27);

SELECT col_default_is('outbox', 'settings', 'destination_charset', 'any', 'any by default');
SELECT throws_ok($$UPDATE outbox.settings SET destination_charset = 'utf8'$$, '23514', NULL, 'only any and latin1');
SELECT is(sqltest.try_as('outbox_writer', $$UPDATE outbox.settings SET destination_charset = 'any'$$), '42501',
  'writers cannot change it');

-- latin1 --------------------------------------------------------------------------

\set refused '23514: new row for relation "messages" violates check constraint "messages_destination_valid" [destination names must be Latin-1 (settings.destination_charset)]'
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('заказы', 'c-1')$$), :'refused',
  'enqueue refuses a name beyond Latin-1: 23514, the rule in DETAIL');
SELECT is(sqltest.try_login('app_a', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('c-2', 'заказы')$$),
  :'refused', '... and so does a plain INSERT');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('billing.ж', 'c-3')$$), :'refused',
  'billing.* does not admit billing.ж');
SELECT is(sqltest.try_login('app_a', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('c-4', 'billing.ж')$$),
  :'refused', '... nor does a plain INSERT');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('billing.🦊', 'c-5')$$), :'refused', 'an emoji is refused');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('billing.' || chr(256), 'c-6')$$), :'refused',
  'U+0100, the first character past Latin-1, is refused');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('café', 'c-7')$$), 'ok', 'café is Latin-1: admitted');
SELECT is(sqltest.try_login('app_a', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('c-8', 'billing.x')$$),
  'ok', 'billing.x: admitted');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('billing.ÿ', 'c-9')$$), 'ok', 'U+00FF, the last, is admitted');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('audit', 'c-10')$$),
  '23514: new row for relation "messages" violates check constraint "messages_destination_valid" '
  '[a plain destination name must be listed in settings.allowed_destinations]',
  'a Latin-1 name outside the list still answers to the list');
SELECT is(sqltest.try_login('app_a', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('c-11', '/queue/заказы')$$),
  :'refused', 'a full address under an allowed prefix is refused too');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('/queue/заказы', 'c-12')$$),
  '22023: destination must be a plain name [destination names must be Latin-1 (settings.destination_charset)]',
  'enqueue() raises for an address what it raises for the address rule, the charset rule in DETAIL');
SELECT is(sqltest.try_login('app_a', $$SELECT outbox.enqueue('/queue/café', 'c-13')$$), 'ok', '/queue/café: admitted');
SELECT is((SELECT string_agg(message_id, ',' ORDER BY id) FROM outbox.messages WHERE message_id ~ '^c-'),
  'c-7,c-8,c-9,c-13', 'exactly the admitted rows were written');
SELECT is(outbox.destination_problem('заказы'), 'destination names must be Latin-1 (settings.destination_charset)',
  'destination_problem says why');
SELECT is(outbox.destination_problem('café'), NULL, '... and nothing for a Latin-1 name in the list');

-- any -----------------------------------------------------------------------------

UPDATE outbox.settings SET destination_charset = 'any', allowed_destinations = NULL;
-- What the insert trigger calls per row while no rule is set: nothing.
SET LOCAL track_functions = 'all';
SELECT is(sqltest.try_as('outbox_writer', $$SELECT outbox.enqueue('заказы', 's-1'), outbox.enqueue('billing.🦊', 's-2')$$),
  'ok', 'any: a name beyond Latin-1, an emoji');
SELECT is(sqltest.try_as('outbox_writer', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('s-3', 'billing.ж')$$),
  'ok', 'any: a plain INSERT of one too');
SELECT is((SELECT sum(calls) FROM pg_stat_xact_user_functions
            WHERE funcname IN ('beyond_latin1', 'destination_allowed', 'plain_name_allowed', 'destination_problem',
                               'check_inserted_row')),
  NULL, 'any, no list: an insert calls no rule function');
SELECT is(outbox.destination_problem('заказы'), NULL, 'any: no problem');

-- Rows stored before latin1 was set: the dispatcher asks, and parks them.
INSERT INTO outbox.messages (message_id, destination) VALUES ('s-4', 'café'), ('s-5', '/queue/заказы');
UPDATE outbox.settings SET destination_charset = 'latin1';
SELECT results_eq($$SELECT message_id, outbox.destination_allowed(destination) FROM outbox.messages
                     WHERE message_id ~ '^s-' ORDER BY 1$$,
  $$VALUES ('s-1', false), ('s-2', false), ('s-3', false), ('s-4', true), ('s-5', false)$$,
  'latin1: a stored row beyond Latin-1 is not allowed, plain name or address');
SELECT is(sqltest.try_as_member('outbox_dispatcher', $$SELECT outbox.destination_allowed('заказы')::text$$), 'ok',
  'the dispatcher may call destination_allowed, and the test it inlines');
UPDATE outbox.settings SET allowed_destinations = '{billing.*}';
SELECT results_eq($$SELECT message_id, outbox.destination_allowed(destination) FROM outbox.messages
                     WHERE message_id IN ('s-3', 's-4') ORDER BY 1$$,
  $$VALUES ('s-3', false), ('s-4', false)$$, 'with a list too: each rule refuses on its own');
SELECT is(outbox.beyond_latin1('Ünïcödé ÿ'), false, 'Latin-1 letters are not beyond it');

SELECT * FROM finish();
ROLLBACK;
