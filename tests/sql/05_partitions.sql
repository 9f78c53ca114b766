-- Partition derivation and outbox.set_partition_count(): trigger rewritten, non-final rows re-hashed, leases reset.
BEGIN;
SET search_path = public;
SELECT plan(16);

INSERT INTO outbox.messages (message_id, destination, session_id)
SELECT 'p-' || i, 'orders', CASE WHEN i % 2 = 0 THEN 'session-' || (i % 7) END FROM generate_series(1, 200) i;
UPDATE outbox.messages SET status = 'parked' WHERE message_id IN ('p-1', 'p-2');
UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() WHERE message_id IN ('p-3', 'p-4');
UPDATE outbox.leases SET owner = 'instance-a', epoch = 7, expires_at = now() + interval '15 seconds' WHERE partition < 10;

SELECT is((SELECT count(*) FROM outbox.messages
            WHERE partition <> sqltest.partition_of(coalesce(session_id, message_id), 64)), 0::bigint,
  'partition = (hashtext(coalesce(session_id, message_id)) & 2147483647) % 64');
SELECT ok((SELECT count(DISTINCT partition) > 32 FROM outbox.messages), 'rows spread over the partitions');

SELECT is(outbox.set_partition_count(8),
  (SELECT count(*) FROM outbox.messages
    WHERE status IN ('pending', 'parked')
      AND partition <> sqltest.partition_of(coalesce(session_id, message_id), 8)),
  'set_partition_count(8) returns how many rows moved');
SELECT is((SELECT partition_count FROM outbox.settings), 8, 'settings.partition_count is 8');
SELECT matches((SELECT prosrc FROM pg_proc WHERE oid = 'outbox.messages_set_partition()'::regprocedure),
  'OPERATOR\(pg_catalog\.%\) 8;', 'the trigger function has the literal 8');
SELECT ok((SELECT prosecdef AND prosrc LIKE '%pg_catalog.pg_notify(''outbox_wakeup'', '''')%'
             FROM pg_proc WHERE oid = 'outbox.messages_set_partition()'::regprocedure),
  '... and still looks for an idle instance, as a security definer');
SELECT is((SELECT count(*) FROM outbox.messages
            WHERE status IN ('pending', 'parked')
              AND partition <> sqltest.partition_of(coalesce(session_id, message_id), 8)), 0::bigint,
  'pending and parked rows are re-hashed');
SELECT is((SELECT count(*) FROM outbox.messages
            WHERE status = 'dispatched' AND partition <> sqltest.partition_of(coalesce(session_id, message_id), 64)), 0::bigint,
  'finished rows keep their partition');
SELECT results_eq('SELECT partition, owner, expires_at FROM outbox.leases ORDER BY partition',
  $$SELECT p, NULL::text, NULL::timestamptz FROM generate_series(0, 7) p$$,
  'leases: one free row per new partition');
SELECT is((SELECT min(epoch) FROM outbox.leases), 8::bigint, 'new lease epochs are above every old one');

INSERT INTO outbox.messages (message_id, destination, session_id) VALUES ('after-1', 'orders', 'session-3');
SELECT is((SELECT partition FROM outbox.messages WHERE message_id = 'after-1'), sqltest.partition_of('session-3', 8),
  'new rows hash with the new count');
SELECT is((SELECT count(DISTINCT partition) FROM outbox.messages WHERE session_id = 'session-3' AND status = 'pending'),
  1::bigint, 'a session''s old and new pending rows share a partition');

SELECT is(outbox.set_partition_count(8), 0::bigint, 'the same count again moves nothing');

-- The trigger pins no search_path; a caller's functions and operators that
-- shadow the built-ins must not change the partition.
CREATE SCHEMA evil;
CREATE FUNCTION evil.hashtext(text) RETURNS int LANGUAGE sql AS 'SELECT 0';
CREATE FUNCTION evil.band(bigint, bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint';
CREATE OPERATOR evil.& (FUNCTION = evil.band, LEFTARG = bigint, RIGHTARG = bigint);
SET LOCAL search_path = evil, pg_catalog, public;
INSERT INTO outbox.messages (message_id, destination, session_id) VALUES ('evil-1', 'orders', 'session-5');
SET LOCAL search_path = public;
SELECT is((SELECT partition FROM outbox.messages WHERE message_id = 'evil-1'), sqltest.partition_of('session-5', 8),
  'a search_path that shadows hashtext and & does not change the partition');

SELECT throws_ok('SELECT outbox.set_partition_count(0)', '22023', 'partition count must be 1..4096', 'zero partitions');
SELECT throws_ok('SELECT outbox.set_partition_count(5000)', '22023', 'partition count must be 1..4096', 'too many partitions');

SELECT * FROM finish();
ROLLBACK;
