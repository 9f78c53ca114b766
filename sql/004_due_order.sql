-- 004_due_order: an index for strict session order among due rows (a row waits while an earlier row of its session is a due timeout still pending).
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql, with the same outboxd.schema setting.
--
-- Why: timeouts are claimed in due_at order, rows in id order. When an earlier
-- timeout of a session falls due after a later row was written, or more
-- timeouts fall due at once than one claim takes, the claim must not hand out
-- a later row of that session before the timeout. The dispatcher's claims ask
-- this index, per candidate row, whether its session has a due, pending
-- timeout with a lower id: one short range (session, due so far), usually empty.

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

CREATE INDEX messages_due_session_idx ON messages (session_id, due_at, id)
  WHERE status = 'pending' AND due_at > created_at;
