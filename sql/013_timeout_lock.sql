-- 013_timeout_lock: clear_timeout() locks the state record FOR NO KEY UPDATE, as set_timeout() does since 010, so two transitions racing on a timeout get 40001, not a deadlock.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 010_reschedule.sql, with the same outboxd.schema and outboxd.workflow_schema settings.
--
-- Why: a transition calls record_processed() first, and its insert into
-- processed_messages share-locks the state record through the foreign key
-- (FOR KEY SHARE). set_timeout() and clear_timeout() then locked the record
-- FOR UPDATE, which conflicts with that lock. Two transitions of one workflow
-- that both touch the timeout, such as a payment and its deadline arriving
-- together (the race a timeout exists for), each held the key-share lock the
-- other's FOR UPDATE waited for: PostgreSQL broke the deadlock after
-- deadlock_timeout with SQLSTATE 40P01, where the documented outcome is one
-- transition winning and the other failing with 40001. Neither function
-- changes a key column, so FOR NO KEY UPDATE is enough: it conflicts with
-- another transition's lock of the record and not with a foreign key's.
-- set_timeout() takes the same lock since 010_reschedule.sql redefined it;
-- clear_timeout() differs from 002's body only in the lock clause; grants and
-- comments stay.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  IF to_regclass(format('%I.messages', s)) IS NULL OR to_regclass(format('%I.instances', w)) IS NULL THEN
    RAISE EXCEPTION 'schemas "%" and "%" not found: apply 001_outbox.sql and 002_workflow.sql first', s, w
      USING ERRCODE = 'undefined_table';
  END IF;
  PERFORM set_config('search_path', format('%I, %I, pg_catalog, pg_temp', w, s), false);
END
$$;

CREATE OR REPLACE FUNCTION clear_timeout(workflow_id text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  state instances;
  cancelled boolean := false;
BEGIN
  SELECT * INTO state FROM instances i WHERE i.id = clear_timeout.workflow_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'workflow "%" does not exist', clear_timeout.workflow_id
      USING ERRCODE = 'no_data_found';
  END IF;
  IF state.timeout_message_id IS NULL THEN
    RETURN false;
  END IF;
  cancelled := cancel(state.timeout_message_id);
  UPDATE instances i
     SET timeout_message_id = NULL, timeout_due_at = NULL
   WHERE i.id = state.id;
  RETURN cancelled;
END
$$;
