-- 015's indexes answer the backlog figures of /metrics with index-only lookups whose cost does not grow with the table.
-- The data is committed and vacuumed (this file has a database of its own):
-- index-only scans need the visibility map.
-- 50k due rows of one destination, 50k scheduled of another, some retrying
-- and parked, 2000 finished.
INSERT INTO outbox.messages (message_id, destination, session_id, created_at, due_at)
SELECT 'due-' || i, 'orders', 'wf-' || (i % 500), now() - interval '1 hour' + i * interval '1 ms',
       now() - interval '1 hour' + i * interval '1 ms'
  FROM generate_series(1, 50000) i;
INSERT INTO outbox.messages (message_id, destination, due_at)
SELECT 'later-' || i, 'timeouts', now() + interval '1 day' + i * interval '1 second' FROM generate_series(1, 50000) i;
UPDATE outbox.messages SET attempts = 1, next_attempt_at = now() + interval '1 minute'
 WHERE message_id IN (SELECT 'due-' || i FROM generate_series(1, 30) i);
UPDATE outbox.messages SET status = 'parked' WHERE message_id IN (SELECT 'due-' || i FROM generate_series(31, 40) i);
INSERT INTO outbox.messages (message_id, destination, status, dispatched_at)
SELECT 'done-' || i, 'orders', 'dispatched', now() FROM generate_series(1, 2000) i;
VACUUM ANALYZE outbox.messages;

BEGIN;
SET search_path = public;
SELECT plan(16);

SELECT has_index('outbox', 'messages', 'messages_waiting_idx', ARRAY['destination', 'partition', 'due_at'],
  'messages_waiting_idx leads with destination and partition');
SELECT has_index('outbox', 'messages', 'messages_retrying_idx', ARRAY['destination', 'partition'],
  'messages_retrying_idx leads with destination and partition');
SELECT has_index('outbox', 'messages', 'messages_parked_idx', ARRAY['destination', 'partition'],
  'messages_parked_idx leads with destination and partition');

CREATE FUNCTION pg_temp.buffers(query text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  plan json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ' || query INTO plan;
  RETURN (plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::int + (plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::int;
END $$;

-- The shapes of outboxd's statement (lib/pg/outbox_backlog.cpp), one figure each.
CREATE TEMP TABLE lookups (name text PRIMARY KEY, query text NOT NULL);
INSERT INTO lookups VALUES
  ('next destination', $$SELECT min(m.destination) FROM outbox.messages m
     WHERE m.status = 'pending' AND m.next_attempt_at IS NULL AND m.destination > 'orders'$$),
  ('due count', $$SELECT count(*) FROM (SELECT FROM unnest(ARRAY(SELECT generate_series(0, 63))) p,
     LATERAL (SELECT FROM outbox.messages m WHERE m.destination = 'orders' AND m.partition = p
       AND m.status = 'pending' AND m.next_attempt_at IS NULL AND m.due_at <= now() LIMIT 1000) r LIMIT 1000) c$$),
  ('oldest due', $$SELECT min(o.due_at) FROM unnest(ARRAY(SELECT generate_series(0, 63))) p,
     LATERAL (SELECT m.due_at FROM outbox.messages m WHERE m.destination = 'orders' AND m.partition = p
       AND m.status = 'pending' AND m.next_attempt_at IS NULL AND m.due_at <= now() ORDER BY m.due_at LIMIT 1) o$$),
  ('retrying count', $$SELECT count(*) FROM (SELECT FROM unnest(ARRAY(SELECT generate_series(0, 63))) p,
     LATERAL (SELECT FROM outbox.messages m WHERE m.destination = 'orders' AND m.partition = p
       AND m.status = 'pending' AND m.next_attempt_at IS NOT NULL LIMIT 1000) r LIMIT 1000) c$$),
  ('rank read', $$SELECT count(*), count(*) FILTER (WHERE r.due_at <= now()) FROM (SELECT m.due_at
     FROM outbox.messages m WHERE m.destination = 'orders' AND m.status = 'pending' AND m.next_attempt_at IS NULL
     LIMIT 1000) r$$);

SELECT matches(sqltest.explain((SELECT query FROM lookups WHERE name = 'next destination')),
  'Index Only Scan using messages_waiting_idx', 'the next destination is one look into messages_waiting_idx');
SELECT cmp_ok(pg_temp.buffers((SELECT query FROM lookups WHERE name = 'next destination')), '<', 10,
  '... touching a few pages');
SELECT matches(sqltest.explain((SELECT query FROM lookups WHERE name = 'due count')),
  'Index Only Scan using messages_waiting_idx', 'due rows are counted in messages_waiting_idx');
SELECT is((SELECT count FROM (SELECT count(*) FROM (SELECT FROM unnest(ARRAY(SELECT generate_series(0, 63))) p,
     LATERAL (SELECT FROM outbox.messages m WHERE m.destination = 'orders' AND m.partition = p
       AND m.status = 'pending' AND m.next_attempt_at IS NULL AND m.due_at <= now() LIMIT 1000) r LIMIT 1000) c) x),
  1000::bigint, '... up to the cap, not the 49,960 there are');
SELECT cmp_ok(pg_temp.buffers((SELECT query FROM lookups WHERE name = 'due count')), '<', 250,
  '... touching pages for the cap and one descent per partition');
SELECT matches(sqltest.explain((SELECT query FROM lookups WHERE name = 'oldest due')),
  'Index Only Scan using messages_waiting_idx', 'the oldest due row comes from messages_waiting_idx');
SELECT cmp_ok(pg_temp.buffers((SELECT query FROM lookups WHERE name = 'oldest due')), '<', 250,
  '... one descent per partition, whatever the 50k rows');
SELECT is((SELECT min(due_at) FROM outbox.messages WHERE message_id = 'due-41'),
  (SELECT min(o.due_at) FROM unnest(ARRAY(SELECT generate_series(0, 63))) p,
     LATERAL (SELECT m.due_at FROM outbox.messages m WHERE m.destination = 'orders' AND m.partition = p
       AND m.status = 'pending' AND m.next_attempt_at IS NULL AND m.due_at <= now() ORDER BY m.due_at LIMIT 1) o),
  '... and it is the oldest row neither retrying nor parked');
SELECT matches(sqltest.explain((SELECT query FROM lookups WHERE name = 'retrying count')),
  'Index Only Scan using messages_retrying_idx', 'retrying rows are counted in messages_retrying_idx');
SELECT matches(sqltest.explain((SELECT query FROM lookups WHERE name = 'rank read')),
  'Index Only Scan using messages_waiting_idx', 'a destination is ranked by the first rows of messages_waiting_idx');
SELECT cmp_ok(pg_temp.buffers((SELECT query FROM lookups WHERE name = 'rank read')), '<', 20,
  '... one range, touching the pages of the cap''s entries');
SELECT matches(sqltest.explain($$SELECT 1 FROM outbox.messages b WHERE b.session_id = 'wf-1' AND b.id < 1000000
                                   AND (b.status = 'parked' OR (b.status = 'pending' AND b.next_attempt_at > now()))$$),
  'messages_blocked_idx', 'the claim''s blocked-session probe still uses messages_blocked_idx');
SELECT is(sqltest.try_as_member('outbox_dispatcher', (SELECT query FROM lookups WHERE name = 'oldest due')),
  'ok', 'the dispatcher role may run them');

SELECT * FROM finish();
ROLLBACK;
