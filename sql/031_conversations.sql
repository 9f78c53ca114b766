-- 031_conversations: what one correlation id produced, found by index, for outboxd timeline --correlation and the console.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 030, with the same outboxd.schema and
-- outboxd.workflow_schema settings.
--
-- Why: an operator asks what happened to order 42. Its conversation is every
-- row that its correlation id produced, across sessions and destinations,
-- the consumers' receipts of them and the workflow state records of the
-- correlation id; until now only a read of the whole outbox found its rows.
-- What changes:
--   - messages_correlation_idx (correlation_id, id) over rows that have one:
--     a conversation's newest rows are one index range, read backwards.
--   - instances_correlation_idx (correlation_id) in the workflow schema, over
--     state records that have one.
--   - conversation_states(correlation_id): the state records of the
--     correlation id (id, writer, kind, status, version, timeout; not data),
--     at most 100. A security definer, as workflow_states(): the dispatcher
--     role may not read the workflow tables.
--   - message_receipts(message_id, sender): who recorded the message in this
--     database's inbox (received_messages), under that sending writer or
--     under '' (record_received() without one), at most 100. A security
--     definer: the dispatcher may not read the inbox. It looks up the primary
--     key (consumer, message_id, ...) once per consumer, walking the
--     consumers in name order, so the inbox needs no index of its own for it.
--   - reschedule() records the move in row_events as 'rescheduled', with the
--     due time it had, as fire_scheduled() records 'fired': a timeout a test
--     or a writer moved to now is then told apart in a timeline from one that
--     fell due. row_events_action_valid takes the new action.
--
-- Cost: a writer's insert of a row with a correlation id maintains one more
-- index entry; a row without one pays the predicate's test. A workflow's
-- start() maintains one more entry; its save() none, as it does not change
-- correlation_id. A reschedule() writes one row_events row. CREATE INDEX
-- takes a SHARE lock on messages, which holds
-- writers (not readers) back while it reads the table once. On a large
-- outbox, create the index beforehand with CREATE INDEX CONCURRENTLY and the
-- same definition; IF NOT EXISTS then makes this script skip it.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  IF to_regclass(format('%I.instances', s)) IS NULL
     OR NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = format('%I.instances', s)::regclass
                                                AND attname = 'watching' AND NOT attisdropped) THEN
    RAISE EXCEPTION 'schema "%" is not at 030: apply 001_outbox.sql to 030 first', s
      USING ERRCODE = 'undefined_column';
  END IF;
  IF to_regclass(format('%I.instances', w)) IS NULL THEN
    RAISE EXCEPTION 'workflow schema "%" not found: apply 002_workflow.sql first', w
      USING ERRCODE = 'undefined_table';
  END IF;
  -- The workflow schema first, as for 014's workflow_states().
  PERFORM set_config('search_path', format('%I, %I, pg_catalog, pg_temp', w, s), false);
END
$$;

CREATE INDEX IF NOT EXISTS messages_correlation_idx ON messages (correlation_id, id)
  WHERE correlation_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS instances_correlation_idx ON instances (correlation_id)
  WHERE correlation_id IS NOT NULL;

COMMENT ON INDEX messages_correlation_idx IS
  'Rows by conversation, in id order: outboxd timeline --correlation and the console''s conversation page '
  '(031_conversations.sql).';
COMMENT ON INDEX instances_correlation_idx IS
  'State records by conversation: conversation_states() (031_conversations.sql).';

CREATE FUNCTION conversation_states(correlation_id text)
RETURNS TABLE (id text, writer text, kind text, status text, version bigint, correlation_id text,
               timeout_message_id text, timeout_due_at timestamptz, created_at timestamptz, updated_at timestamptz)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
  SELECT i.id, i.writer, i.kind, i.status, i.version, i.correlation_id, i.timeout_message_id, i.timeout_due_at,
         i.created_at, i.updated_at
    FROM instances i
   WHERE i.correlation_id = conversation_states.correlation_id
   ORDER BY i.created_at, i.id, i.writer
   LIMIT 100
$$;

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  -- Created in the workflow schema's search path but named in the outbox schema.
  EXECUTE format('ALTER FUNCTION %I.conversation_states(text) SET SCHEMA %I', w, s);
  EXECUTE format('COMMENT ON FUNCTION %I.conversation_states(text) IS %L', s,
    'The workflow state records (id, writer, kind, status, version, timeout; not data) whose correlation_id '
    'is the argument, oldest first; at most 100. Security definer: the dispatcher role may not read the '
    'workflow tables.');
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

-- One index descent per consumer to find the next, one per consumer for the
-- message: a walk of at most 1,000 consumers.
CREATE FUNCTION message_receipts(message_id text, sender text)
RETURNS TABLE (consumer text, writer text, sender text, received_at timestamptz)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
  WITH RECURSIVE consumers(name, n) AS (
    SELECT (SELECT min(r.consumer) FROM received_messages r), 1
    UNION ALL
    SELECT (SELECT min(r.consumer) FROM received_messages r WHERE r.consumer > c.name), c.n + 1
      FROM consumers c WHERE c.name IS NOT NULL AND c.n < 1000
  )
  SELECT r.consumer, r.writer, r.sender, r.received_at
    FROM consumers c
    JOIN received_messages r ON r.consumer = c.name AND r.message_id = message_receipts.message_id
   WHERE r.sender IN (message_receipts.sender, '')
   ORDER BY r.received_at, r.consumer
   LIMIT 100
$$;

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  EXECUTE format('COMMENT ON FUNCTION %I.message_receipts(text, text) IS %L', s,
    'Who recorded message_id, sent by writer sender, in this database''s inbox: each consumer''s entry under '
    'that sender or under '''' (record_received() without one), oldest first; at most 100. Security definer: '
    'the dispatcher role may not read received_messages.');
  EXECUTE format('REVOKE ALL ON FUNCTION %1$I.conversation_states(text), %1$I.message_receipts(text, text) '
                 'FROM PUBLIC', s);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.conversation_states(text), %1$I.message_receipts(text, text) '
                 'TO %2$I', s, s || '_dispatcher');
END
$$;

-- ---------------------------------------------------------------------------
-- reschedule() leaves a trail
-- ---------------------------------------------------------------------------

-- NOT VALID, then VALIDATE: the check is wider than the one it replaces, and
-- validating it takes no lock that holds back the trail's writers.
ALTER TABLE row_events DROP CONSTRAINT row_events_action_valid,
  ADD CONSTRAINT row_events_action_valid
    CHECK (action IN ('parked', 'requeued', 'skipped', 'replayed', 'cancelled', 'fired', 'dispatched', 'rescheduled'))
    NOT VALID;
ALTER TABLE row_events VALIDATE CONSTRAINT row_events_action_valid;

CREATE OR REPLACE FUNCTION reschedule(message_id text, due_at timestamptz)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  target record;
  was_due timestamptz;
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
  SELECT m.due_at INTO was_due FROM messages m WHERE m.id = target.row_id;
  UPDATE messages m SET due_at = reschedule.due_at WHERE m.id = target.row_id;
  INSERT INTO row_events (row_id, message_id, action, detail)
  VALUES (target.row_id, reschedule.message_id, 'rescheduled', 'was due at ' || was_due);
  RETURN true;
END
$$;

COMMENT ON FUNCTION reschedule(text, timestamptz) IS
  'Moves a pending message of the caller (writer = session_user) that is not yet due to a new due_at '
  '(earlier or later; now() or a past time means due at once) in the caller''s transaction, keeping its id '
  'and its place in its session''s order, and records the move in row_events (rescheduled, the due time it '
  'had). Returns true if moved; false if the row exists but is already due (it may be in flight), '
  'dispatched, cancelled or parked; NULL if the caller has no row with this message_id (unknown, purged, or '
  'another writer''s). 22023 for a NULL or infinite due_at.';
