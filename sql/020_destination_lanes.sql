-- 020_destination_lanes: indexes for claiming by destination, so that a backlog in one destination holds back no other.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 018, with the same outboxd.schema setting.
--
-- Why: outboxd claims immediate rows in id order (messages_ready_idx), so a
-- row committed behind a backlog of 200,000 rows of another destination
-- waited for the whole backlog. While its claims are full, it now also reads
-- the first rows of every other destination that has any (one look per
-- destination in name order, a few rows from the head of each):
--   - messages_lane_idx (destination, id) over immediate pending rows: the
--     distinct destinations with rows, and each one's rows in id order;
--   - messages_session_pending_idx (session_id, id) over pending rows of a
--     session: a row read this way goes out only if no earlier pending row
--     of its session, in another destination, is still unclaimed, so that
--     sessions stay in id order across destinations.
--
-- Cost: a writer's insert maintains two more index entries (one for a row
-- without session_id). CREATE INDEX takes a SHARE lock on messages, which
-- holds writers (not readers) back while it reads the table once and sorts
-- the pending rows. On a large outbox, create the indexes beforehand with
-- CREATE INDEX CONCURRENTLY and the same definitions; IF NOT EXISTS then
-- makes this script skip them.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regprocedure(format('%I.messages_check_destination()', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 018: apply 001_outbox.sql to 018 first', s
      USING ERRCODE = 'undefined_function';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

CREATE INDEX IF NOT EXISTS messages_lane_idx ON messages (destination, id)
  WHERE status = 'pending' AND due_at <= created_at;
CREATE INDEX IF NOT EXISTS messages_session_pending_idx ON messages (session_id, id)
  WHERE status = 'pending' AND session_id IS NOT NULL;

COMMENT ON INDEX messages_lane_idx IS
  'Immediate pending rows by destination, in id order: outboxd reads a few rows of each destination '
  'besides a backlog (020_destination_lanes.sql).';
COMMENT ON INDEX messages_session_pending_idx IS
  'Pending rows of each session in id order: a row claimed by destination waits for an earlier row of its '
  'session in another destination (020_destination_lanes.sql).';
