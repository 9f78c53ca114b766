-- 012_workflow_emit: workflow.emit() enqueues a message of a workflow with the session, correlation and originating ids of its state record.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 003_roles.sql, with the same outboxd.schema and
-- outboxd.workflow_schema settings.
--
-- Why: set_timeout() took session_id, correlation_id and originating_message_id
-- from the state record, but every other message of a transition went through
-- outbox.enqueue(), where the process manager had to pass all three again, per
-- message. Forgetting session_id loses the workflow's per-session order;
-- forgetting the others loses the trace back to the message that started it.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  IF to_regclass(format('%I.messages', s)) IS NULL OR to_regclass(format('%I.instances', w)) IS NULL THEN
    RAISE EXCEPTION 'schemas "%" and "%" not found: apply 001_outbox.sql and 002_workflow.sql first', s, w
      USING ERRCODE = 'undefined_table';
  END IF;
  -- The same search_path as 002's functions: workflow tables first, then outbox's enqueue().
  PERFORM set_config('search_path', format('%I, %I, pg_catalog, pg_temp', w, s), false);
END
$$;

CREATE FUNCTION emit(
  workflow_id       text,
  destination       text,
  message_id        text,
  body              bytea DEFAULT '',
  subject           text DEFAULT NULL,
  headers           jsonb DEFAULT '{}',
  parent_message_id text DEFAULT NULL,
  content_type      text DEFAULT NULL,
  due_at            timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  state instances;
BEGIN
  SELECT * INTO state FROM instances i WHERE i.id = emit.workflow_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'workflow "%" does not exist', emit.workflow_id USING ERRCODE = 'no_data_found';
  END IF;
  RETURN enqueue(
    destination => emit.destination,
    message_id => emit.message_id,
    body => emit.body,
    session_id => state.id,
    correlation_id => state.correlation_id,
    parent_message_id => emit.parent_message_id,
    originating_message_id => state.originating_message_id,
    subject => emit.subject,
    content_type => emit.content_type,
    headers => emit.headers,
    due_at => emit.due_at);
END
$$;

COMMENT ON FUNCTION emit(text, text, text, bytea, text, jsonb, text, text, timestamptz) IS
  'Enqueues a message of workflow workflow_id (outbox.enqueue() with session_id = the workflow '
  'id and correlation_id and originating_message_id from its state record) and returns the '
  'outbox row id, in the caller''s transaction. Idempotent on message_id like enqueue(). '
  'Raises SQLSTATE P0002 if the workflow does not exist.';

CREATE FUNCTION emit(
  workflow_id       text,
  destination       text,
  message_id        text,
  body              jsonb,
  subject           text DEFAULT NULL,
  headers           jsonb DEFAULT '{}',
  parent_message_id text DEFAULT NULL,
  content_type      text DEFAULT NULL,
  due_at            timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  RETURN emit(
      workflow_id => emit.workflow_id,
      destination => emit.destination,
      message_id => emit.message_id,
      body => convert_to(emit.body::text, 'UTF8'),
      subject => emit.subject,
      headers => emit.headers,
      parent_message_id => emit.parent_message_id,
      content_type => coalesce(emit.content_type, 'application/json'),
      due_at => emit.due_at);
END
$$;

COMMENT ON FUNCTION emit(text, text, text, jsonb, text, jsonb, text, text, timestamptz) IS
  'emit() with a jsonb body (its UTF-8 text); content_type defaults to application/json.';

CREATE FUNCTION emit(
  workflow_id       text,
  destination       text,
  message_id        text,
  body              text,
  subject           text DEFAULT NULL,
  headers           jsonb DEFAULT '{}',
  parent_message_id text DEFAULT NULL,
  content_type      text DEFAULT NULL,
  due_at            timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  RETURN emit(
      workflow_id => emit.workflow_id,
      destination => emit.destination,
      message_id => emit.message_id,
      body => convert_to(emit.body, 'UTF8'),
      subject => emit.subject,
      headers => emit.headers,
      parent_message_id => emit.parent_message_id,
      content_type => emit.content_type,
      due_at => emit.due_at);
END
$$;

COMMENT ON FUNCTION emit(text, text, text, text, text, jsonb, text, text, timestamptz) IS
  'emit() with a text body (UTF-8 bytes). An untyped literal body picks this overload.';

-- Writers run workflows; the dispatcher never touches them.
DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
  f text;
BEGIN
  FOREACH f IN ARRAY ARRAY['bytea', 'jsonb', 'text'] LOOP
    f := format('%I.emit(text, text, text, %s, text, jsonb, text, text, timestamptz)', w, f);
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, s || '_writer');
  END LOOP;
END
$$;
