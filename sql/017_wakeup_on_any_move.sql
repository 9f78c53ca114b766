-- 017_wakeup_on_any_move: a pending row moved later NOTIFYs <schema>_wakeup too, as one moved earlier does.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 010_reschedule.sql, with the same outboxd.schema setting.
--
-- Why: 010 woke an idle instance only for a row moved earlier, counting on
-- the instance's timer for the old due time to find a row moved later. But a
-- reschedule whose transaction is still open at that time hides the move:
-- its row is locked (the claim of scheduled rows skips it) and its old due
-- time, already past, is not a next due time either. Once the move commits
-- nothing wakes the instance, and the row waited for the fallback poll
-- (dispatch.poll_interval_ms) instead of its new due time. The NOTIFY, sent
-- at commit while some instance is idle, makes it claim again and read the
-- new due time. It costs one NOTIFY per moved row while an instance sleeps.

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

DROP TRIGGER messages_wakeup_reschedule ON messages;

CREATE TRIGGER messages_wakeup_reschedule
  AFTER UPDATE OF due_at ON messages
  FOR EACH ROW
  WHEN (NEW.status = 'pending' AND NEW.due_at IS DISTINCT FROM OLD.due_at)
  EXECUTE FUNCTION notify_wakeup();

COMMENT ON FUNCTION notify_wakeup() IS
  'AFTER UPDATE trigger of messages, for a requeue to pending (messages_wakeup_requeue) and a pending row '
  'moved to another due time (messages_wakeup_reschedule): NOTIFY <schema>_wakeup (empty payload) if some '
  'instance is idle. Inserts look in messages_set_partition(). Security definer because writers may not read '
  'instances.';
