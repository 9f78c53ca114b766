-- 026: an insert runs one rule function given the row whole and one trigger, rewritten whenever settings change.
SELECT sqltest.writer_login('app_a');

BEGIN;
SET search_path = public;
SELECT plan(11);

SELECT is(pg_get_constraintdef((SELECT oid FROM pg_constraint WHERE conname = 'messages_row_valid'
                                  AND conrelid = 'outbox.messages'::regclass)),
  'CHECK (outbox.messages_row_valid(messages.*))', 'the CHECK hands the row whole to messages_row_valid()');
SELECT is((SELECT count(*) FROM pg_proc WHERE proname = 'messages_row_valid'
             AND pronamespace = 'outbox'::regnamespace)::int, 1, 'the 17-argument messages_row_valid() is gone');
SELECT hasnt_trigger('outbox', 'messages', 'messages_check_destination',
  'the destination rules run in the partition trigger, not a trigger of their own');

-- The trigger's body holds only the rules set: none by default.
CREATE FUNCTION pg_temp.trigger_body() RETURNS text LANGUAGE sql
  RETURN (SELECT prosrc FROM pg_proc WHERE oid = 'outbox.messages_set_partition()'::regprocedure);
SELECT ok(pg_temp.trigger_body() NOT LIKE '%beyond_latin1%' AND pg_temp.trigger_body() NOT LIKE '%plain_name_allowed%',
  'while neither destination rule is set, an insert tests none');

UPDATE outbox.settings SET allowed_destinations = '{orders,billing.*}';
SELECT ok(pg_temp.trigger_body() LIKE '%plain_name_allowed(NEW.destination, ''{orders,billing.*}''::pg_catalog.text[])%',
  'setting allowed_destinations writes the list into the trigger');
SELECT is(sqltest.try_as('outbox_writer', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('c-1', 'audit')$$),
  '23514', 'a plain INSERT outside the list is refused at once, in the same transaction');
SELECT is(sqltest.try_as('outbox_writer', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('c-2', 'billing.x')$$),
  'ok', '... and one under a listed prefix goes in');

UPDATE outbox.settings SET destination_charset = 'latin1', allowed_destinations = NULL;
SELECT ok(pg_temp.trigger_body() LIKE '%beyond_latin1(NEW.destination)%'
          AND pg_temp.trigger_body() NOT LIKE '%plain_name_allowed%',
  'the charset rule in, the list out, as settings now say');
SELECT is(sqltest.try_as('outbox_writer', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('c-3', 'заказы')$$),
  '23514', 'a name beyond Latin-1 is refused');

SELECT lives_ok($$SELECT outbox.set_partition_count(16)$$, 'set_partition_count() still rewrites it');
SELECT ok(pg_temp.trigger_body() LIKE '%OPERATOR(pg_catalog.%) 16;%' AND pg_temp.trigger_body() LIKE '%beyond_latin1%',
  '... with the new count and the rules in force');

SELECT * FROM finish();
ROLLBACK;
