-- 015_backlog_index: three partial indexes led by destination and partition, so that the backlog figures of /metrics cost index lookups, not table scans.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql, with the same outboxd.schema setting.
--
-- Why: outboxd reports per destination, for the partitions it leases, how
-- many rows wait and how long the oldest due one has waited. No index of
-- 001 or 004 leads with the destination, so each figure would read every
-- pending row. With these, the oldest due time and the next scheduled time
-- of a destination are one descent per partition, the list of destinations a
-- skip scan, and the counts stop at a cap (see docs/metrics.md).
--
-- messages_waiting_idx holds the pending rows that have not failed yet
-- (due now or scheduled, told apart by due_at), messages_retrying_idx the
-- pending rows with a failed delivery (backing off or due again), and
-- messages_parked_idx the parked rows. None holds a finished row. The last
-- two are apart, not one index on their union: that union is exactly
-- messages_blocked_idx's, and the planner then took the new index for the
-- claim's blocked-session probe, which needs session_id.
--
-- Cost: CREATE INDEX takes a SHARE lock on messages, which holds writers
-- (not readers) back while it reads the table once and sorts the pending
-- rows. On a large outbox, create the indexes beforehand with
-- CREATE INDEX CONCURRENTLY and the same definitions; IF NOT EXISTS then
-- makes this script skip them.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regclass(format('%I.messages', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" not found: apply 001_outbox.sql first', s
      USING ERRCODE = 'undefined_table';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

CREATE INDEX IF NOT EXISTS messages_waiting_idx ON messages (destination, partition, due_at)
  WHERE status = 'pending' AND next_attempt_at IS NULL;
CREATE INDEX IF NOT EXISTS messages_retrying_idx ON messages (destination, partition)
  WHERE status = 'pending' AND next_attempt_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_parked_idx ON messages (destination, partition)
  WHERE status = 'parked';

COMMENT ON INDEX messages_waiting_idx IS
  'Backlog figures of outboxd''s /metrics: pending rows not failed yet, by destination, partition and due time.';
COMMENT ON INDEX messages_retrying_idx IS
  'Backlog figures of outboxd''s /metrics: pending rows after a failed delivery, by destination and partition.';
COMMENT ON INDEX messages_parked_idx IS
  'Backlog figures of outboxd''s /metrics: parked rows, by destination and partition.';
