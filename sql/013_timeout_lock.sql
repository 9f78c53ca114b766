-- 013_timeout_lock: set_timeout() and clear_timeout() lock the state record FOR NO KEY UPDATE, so two transitions racing on a timeout get 40001, not a deadlock.
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
-- Only the lock clause differs from the bodies of 002 (clear_timeout) and 010
-- (set_timeout, which moves a timeout set again); grants and comments stay.

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

CREATE OR REPLACE FUNCTION set_timeout(
  workflow_id       text,
  message_id        text,
  due_at            timestamptz,
  destination       text,
  body              bytea DEFAULT '',
  subject           text DEFAULT NULL,
  headers           jsonb DEFAULT '{}',
  parent_message_id text DEFAULT NULL,
  content_type      text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  state instances;
  row_id bigint;
BEGIN
  IF set_timeout.due_at IS NULL THEN
    RAISE EXCEPTION 'due_at is required' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT * INTO state FROM instances i WHERE i.id = set_timeout.workflow_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'workflow "%" does not exist', set_timeout.workflow_id
      USING ERRCODE = 'no_data_found';
  END IF;

  IF state.timeout_message_id = set_timeout.message_id
     AND state.timeout_due_at IS DISTINCT FROM set_timeout.due_at THEN
    -- The same timeout at another time: move its row (010_reschedule.sql).
    PERFORM reschedule(set_timeout.message_id, set_timeout.due_at);
  END IF;

  row_id := enqueue(
    destination => set_timeout.destination,
    message_id => set_timeout.message_id,
    body => set_timeout.body,
    session_id => state.id,
    correlation_id => state.correlation_id,
    parent_message_id => set_timeout.parent_message_id,
    originating_message_id => state.originating_message_id,
    subject => set_timeout.subject,
    content_type => set_timeout.content_type,
    headers => set_timeout.headers,
    due_at => set_timeout.due_at);

  IF state.timeout_message_id IS DISTINCT FROM set_timeout.message_id
     AND state.timeout_message_id IS NOT NULL THEN
    -- False when the old one is already due: its handler will find it stale.
    PERFORM cancel(state.timeout_message_id);
  END IF;

  UPDATE instances i
     SET timeout_message_id = set_timeout.message_id,
         timeout_due_at = set_timeout.due_at
   WHERE i.id = state.id;
  RETURN row_id;
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
