-- standby_position() (024): the dispatcher reads the primary's WAL position and a standby's flushed one, and nothing else of pg_stat_replication.
BEGIN;
SET search_path = public;
SELECT plan(7);

SELECT is(sqltest.try_as_member('outbox_dispatcher',
  $$SELECT (wal_position > '0/0')::text FROM outbox.standby_position(NULL)$$), 'ok',
  'the dispatcher may read the positions');
SELECT is(sqltest.try_as_member('outbox_writer', $$SELECT wal_position::text FROM outbox.standby_position(NULL)$$),
  '42501', 'a writer may not');
SELECT is(sqltest.try_as_member('outbox_dispatcher', $$SELECT count(*)::text FROM pg_stat_replication
                                                      WHERE flush_lsn IS NOT NULL$$), 'ok',
  'the dispatcher''s own view of pg_stat_replication is its usual one (the function grants it nothing more)');
-- Read in three statements, in order: other sessions may write WAL meanwhile.
SELECT pg_current_wal_insert_lsn() AS before_call \gset
SELECT wal_position AS at_call FROM outbox.standby_position(NULL) \gset
SELECT ok(:'before_call'::pg_lsn <= :'at_call'::pg_lsn AND :'at_call'::pg_lsn <= pg_current_wal_insert_lsn(),
  'wal_position is the insert position, read at the call');
SELECT is((SELECT flushed FROM outbox.standby_position(NULL)), NULL::pg_lsn,
  'no standby streams from the test cluster: flushed is NULL');
SELECT is((SELECT flushed FROM outbox.standby_position('replica1')), NULL::pg_lsn,
  'nor from a named one');
SELECT is((SELECT prosecdef FROM pg_proc WHERE oid = 'outbox.standby_position(text)'::regprocedure), true,
  'it runs as its owner, who may read pg_stat_replication');

SELECT * FROM finish();
ROLLBACK;
