-- The dispatcher's claims use the partial indexes, so 100k not-yet-due timeouts do not slow the claim of immediate rows.
BEGIN;
SET search_path = public;
SELECT plan(14);

-- 100k scheduled rows not due for a day or more, 300 immediate rows (2 of them
-- parked), 50 scheduled rows already due, 2000 finished rows.
INSERT INTO outbox.messages (message_id, destination, session_id, due_at)
SELECT 'future-' || i, 'timeouts', 'wf-' || (i % 5000), now() + interval '1 day' + i * interval '1 second'
  FROM generate_series(1, 100000) i;
INSERT INTO outbox.messages (message_id, destination, session_id)
SELECT 'now-' || i, 'orders', 'order-' || (i % 40) FROM generate_series(1, 300) i;
INSERT INTO outbox.messages (message_id, destination, created_at, due_at)
SELECT 'due-' || i, 'timeouts', now() - interval '1 hour', now() - interval '1 minute' FROM generate_series(1, 50) i;
INSERT INTO outbox.messages (message_id, destination, status, dispatched_at)
SELECT 'done-' || i, 'orders', 'dispatched', now() - interval '2 days' FROM generate_series(1, 2000) i;
UPDATE outbox.messages SET status = 'parked' WHERE message_id IN ('now-1', 'now-2');
ANALYZE outbox.messages;

-- Shared buffers (hit + read) that query touches, from EXPLAIN (ANALYZE, BUFFERS).
CREATE FUNCTION pg_temp.buffers(query text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  plan json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ' || query INTO plan;
  RETURN (plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::int + (plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::int;
END $$;

CREATE TEMP TABLE claims (name text PRIMARY KEY, query text NOT NULL);
INSERT INTO claims VALUES
  ('immediate', $$SELECT * FROM outbox.messages
                   WHERE status = 'pending' AND due_at <= created_at
                     AND partition = ANY(ARRAY(SELECT generate_series(0, 63)))
                   ORDER BY id LIMIT 500$$),
  ('scheduled', $$SELECT * FROM outbox.messages
                   WHERE status = 'pending' AND due_at > created_at AND due_at <= now()
                   ORDER BY due_at, id LIMIT 500$$),
  ('scheduled by id, locking', $$SELECT * FROM outbox.messages m
                   WHERE m.status = 'pending' AND m.due_at > m.created_at AND m.due_at <= now()
                     AND m.partition = ANY(ARRAY(SELECT generate_series(0, 63)))
                   ORDER BY m.id LIMIT 500 FOR UPDATE OF m SKIP LOCKED$$),
  ('blocked session', $$SELECT 1 FROM outbox.messages b
                   WHERE b.session_id = 'order-1' AND b.id < 1000000
                     AND (b.status = 'parked' OR (b.status = 'pending' AND b.next_attempt_at > now()))$$),
  ('due timeout earlier in session', $$SELECT 1 FROM outbox.messages e
                   WHERE e.session_id = 'wf-7' AND e.status = 'pending' AND e.due_at > e.created_at
                     AND e.due_at <= now() AND e.id < 1000000$$),
  ('next due', $$SELECT min(s.due_at) FROM outbox.messages s
                   WHERE s.status = 'pending' AND s.due_at > s.created_at AND s.due_at > now()$$),
  ('purge dispatched', $$SELECT id FROM outbox.messages
                   WHERE status = 'dispatched' AND dispatched_at < now() - interval '1 day'
                   ORDER BY dispatched_at LIMIT 1000$$),
  ('purge cancelled', $$SELECT id FROM outbox.messages
                   WHERE status = 'cancelled' AND cancelled_at < now() - interval '7 days'
                   ORDER BY cancelled_at LIMIT 1000$$),
  ('cancel', $$SELECT id FROM outbox.messages WHERE message_id = 'future-77'$$);

SELECT matches(sqltest.explain((SELECT query FROM claims WHERE name = 'immediate')),
  'Index Scan using messages_ready_idx on messages',
  'claim of immediate rows walks messages_ready_idx in id order');
SELECT cmp_ok(pg_temp.buffers((SELECT query FROM claims WHERE name = 'immediate')), '<', 50,
  '... touching a few pages, not the 100k future rows');
SELECT is((SELECT count(*) FROM outbox.messages
            WHERE status = 'pending' AND due_at <= created_at
              AND partition = ANY(ARRAY(SELECT generate_series(0, 63)))), 298::bigint,
  '... and it finds exactly the immediate pending rows');

SELECT matches(sqltest.explain((SELECT query FROM claims WHERE name = 'scheduled')),
  'Index Scan using messages_scheduled_idx on messages',
  'claim of due scheduled rows in due order walks messages_scheduled_idx');
SELECT cmp_ok(pg_temp.buffers((SELECT query FROM claims WHERE name = 'scheduled')), '<', 50,
  '... touching a few pages');
SELECT matches(sqltest.explain((SELECT query FROM claims WHERE name = 'scheduled by id, locking')),
  'messages_scheduled_idx', 'claim of due scheduled rows in id order with SKIP LOCKED uses messages_scheduled_idx');
SELECT is((SELECT count(*) FROM outbox.messages
            WHERE status = 'pending' AND due_at > created_at AND due_at <= now()), 50::bigint,
  '... and it finds exactly the due scheduled rows');

SELECT matches(sqltest.explain((SELECT query FROM claims WHERE name = 'blocked session')),
  'messages_blocked_idx', 'the blocked-session probe uses messages_blocked_idx');
SELECT matches(sqltest.explain((SELECT query FROM claims WHERE name = 'due timeout earlier in session')),
  'messages_due_session_idx', 'the earlier-due-timeout probe uses messages_due_session_idx');
SELECT cmp_ok(pg_temp.buffers((SELECT query FROM claims WHERE name = 'due timeout earlier in session')), '<', 10,
  '... reading only the due part of the session''s range, not its 20 future timeouts');
SELECT matches(sqltest.explain((SELECT query FROM claims WHERE name = 'next due')),
  'messages_scheduled_idx', 'the next due time comes from messages_scheduled_idx');
SELECT matches(sqltest.explain((SELECT query FROM claims WHERE name = 'purge dispatched')),
  'Index Scan using messages_dispatched_idx', 'the retention purge walks messages_dispatched_idx ...');
SELECT matches(sqltest.explain((SELECT query FROM claims WHERE name = 'purge cancelled')),
  'Index Scan using messages_cancelled_idx', '... and messages_cancelled_idx');
SELECT matches(sqltest.explain((SELECT query FROM claims WHERE name = 'cancel')),
  'messages_message_id_key', 'cancel finds its row through the message_id key');

SELECT * FROM finish();
ROLLBACK;
