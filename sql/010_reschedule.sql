-- 010_reschedule: reschedule() moves a writer's waiting row to a new due time; moving one earlier wakes an idle outboxd; set_timeout() moves a timeout it sets again.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 009, with the same outboxd.schema and
-- outboxd.workflow_schema settings.
--
-- Why: a timeout could only be cancelled and written again under a new id,
-- so a workflow that extends its deadline, or an integration test that wants
-- a timeout now, had no way to move it. reschedule() follows cancel(): only
-- the caller's own rows (messages.writer, 009), only while not yet due by the
-- clock, locked before it looks, so that a row being claimed is either moved
-- before the claim sees it or left alone.
--
-- What changes:
--   - outbox.reschedule(message_id, due_at) returns true (moved), false (the
--     row exists but is due, in flight, dispatched, cancelled or parked) or
--     NULL (no row of the caller's has this id).
--   - messages_wakeup_reschedule: an UPDATE that moves a pending row earlier
--     NOTIFYs <schema>_wakeup while some instance is idle, as a new row does.
--   - workflow.set_timeout() reschedules the workflow's timeout when it is set
--     again with the same message_id and another due time, and locks the
--     state record FOR NO KEY UPDATE (why: 013_timeout_lock.sql).

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  IF to_regclass(format('%I.messages', s)) IS NULL OR to_regclass(format('%I.instances', w)) IS NULL THEN
    RAISE EXCEPTION 'schemas "%" and "%" not found: apply 001_outbox.sql and 002_workflow.sql first', s, w
      USING ERRCODE = 'undefined_table';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

CREATE FUNCTION reschedule(message_id text, due_at timestamptz)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  target record;
BEGIN
  IF reschedule.due_at IS NULL OR NOT isfinite(reschedule.due_at) THEN
    RAISE EXCEPTION 'due_at must be finite' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- As cancel(): lock_waiting_row() (009) locks the row before it looks at
  -- the clock. A row the scheduled claim holds is due, and we see so once it
  -- lets go; a row we hold is skipped by the claim (SKIP LOCKED), which after
  -- our commit sees the new due time. Either the claim has the row (and it is
  -- sent at its old time) or we moved it (and it is sent at the new one).
  SELECT * INTO target FROM lock_waiting_row(reschedule.message_id);
  IF target.row_id IS NULL THEN
    RETURN NULL;
  END IF;
  IF NOT target.waiting THEN
    RETURN false;
  END IF;
  UPDATE messages m SET due_at = reschedule.due_at WHERE m.id = target.row_id;
  RETURN true;
END
$$;

COMMENT ON FUNCTION reschedule(text, timestamptz) IS
  'Moves a pending message of the caller (writer = session_user) that is not yet due to a new due_at '
  '(earlier or later; now() or a past time means due at once) in the caller''s transaction, keeping its id '
  'and its place in its session''s order. Returns true if moved; false if the row exists but is already due '
  '(it may be in flight), dispatched, cancelled or parked; NULL if the caller has no row with this '
  'message_id (unknown, purged, or another writer''s). 22023 for a NULL or infinite due_at.';

REVOKE ALL ON FUNCTION reschedule(text, timestamptz) FROM PUBLIC;

DO $$
BEGIN
  EXECUTE format('GRANT EXECUTE ON FUNCTION reschedule(text, timestamptz) TO %I', current_schema() || '_writer');
END
$$;

-- Row level with a WHEN clause, like messages_wakeup_requeue: only a row
-- moved earlier can be due before the time an idle outboxd sleeps until; a
-- row moved later at most wakes it once for nothing.
CREATE TRIGGER messages_wakeup_reschedule
  AFTER UPDATE OF due_at ON messages
  FOR EACH ROW
  WHEN (NEW.status = 'pending' AND NEW.due_at < OLD.due_at)
  EXECUTE FUNCTION notify_wakeup();

COMMENT ON FUNCTION notify_wakeup() IS
  'AFTER UPDATE trigger of messages, for a requeue to pending (messages_wakeup_requeue) and a pending row '
  'moved earlier (messages_wakeup_reschedule): NOTIFY <schema>_wakeup (empty payload) if some instance is '
  'idle. Inserts look in messages_set_partition(). Security definer because writers may not read instances.';

-- ---------------------------------------------------------------------------
-- workflow.set_timeout() moves its timeout
-- ---------------------------------------------------------------------------

DO $$
BEGIN
  PERFORM set_config('search_path', format('%I, %s',
    coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow'),
    current_setting('search_path')), false);
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
  -- FOR NO KEY UPDATE, not FOR UPDATE: see 013_timeout_lock.sql.
  SELECT * INTO state FROM instances i WHERE i.id = set_timeout.workflow_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'workflow "%" does not exist', set_timeout.workflow_id
      USING ERRCODE = 'no_data_found';
  END IF;

  IF state.timeout_message_id = set_timeout.message_id
     AND state.timeout_due_at IS DISTINCT FROM set_timeout.due_at THEN
    -- The same timeout at another time: move its row. If it is already due or
    -- gone, enqueue() below finds it (or inserts it anew once purged) and, the
    -- due time differing, reports the conflict as before.
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

COMMENT ON FUNCTION set_timeout(text, text, timestamptz, text, bytea, text, jsonb, text, text) IS
  'Arms the workflow''s timeout: enqueues message_id as an outbox row scheduled for due_at '
  '(session_id = workflow id, correlation and originating ids from the state record), cancels '
  'the previous timeout''s row if it had another id, records the new id and due time, and '
  'returns the outbox row id, all in the caller''s transaction. Setting the same timeout again '
  'is idempotent; with the same message_id and another due_at it moves the row (reschedule()) '
  'while it is not yet due, and raises 23505 once it is. Does not change version: call it in '
  'the same transaction as save().';
