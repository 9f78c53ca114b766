-- refresh_statistics() (025): the dispatcher may have the messages table analyzed, as its owner, and nothing else.
BEGIN;
SET search_path = public;
SELECT plan(4);

SELECT is(sqltest.try_as_member('outbox_dispatcher', $$SELECT outbox.refresh_statistics()::text$$), 'ok',
  'the dispatcher may refresh the statistics');
SELECT isnt(sqltest.try_as_member('outbox_writer', $$SELECT outbox.refresh_statistics()::text$$), 'ok',
  'a writer may not');

-- A bulk the statistics do not count yet is counted once refreshed.
INSERT INTO outbox.messages (message_id, destination, body)
  SELECT 'stats:' || i, 'stats', '\x'::bytea FROM generate_series(1, 2000) i;
SELECT outbox.refresh_statistics();
SELECT cmp_ok((SELECT reltuples FROM pg_class WHERE oid = 'outbox.messages'::regclass), '>=', 2000::real,
  'the table''s row estimate counts the bulk');
SELECT is((SELECT prosecdef FROM pg_proc WHERE oid = 'outbox.refresh_statistics()'::regprocedure), true,
  'it runs as its owner');

SELECT * FROM finish();
ROLLBACK;
