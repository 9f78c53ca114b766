-- 002_workflow: application-owned workflow state (process managers) written in the same transaction as the outbox rows.
--
-- One state record per workflow with an optimistic version, the inbound
-- message ids already processed, compensation steps, and the current timeout,
-- which is a scheduled outbox row. Schema names come from outboxd.workflow_schema
-- (default workflow) and outboxd.schema (default outbox; 001 must be applied).
-- The functions run with search_path = workflow, outbox: unqualified names are
-- the workflow tables first (workflow.instances, not outbox.instances), then
-- outbox's enqueue() and cancel().

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  IF octet_length(w) > 63 OR w ~ '[[:cntrl:]]' THEN
    RAISE EXCEPTION 'outboxd.workflow_schema must be 1..63 bytes without control characters'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF w = s THEN
    RAISE EXCEPTION 'outboxd.workflow_schema must differ from outboxd.schema ("%")', s
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF to_regclass(format('%I.messages', s)) IS NULL THEN
    RAISE EXCEPTION 'outbox schema "%" not found: apply 001_outbox.sql first', s
      USING ERRCODE = 'undefined_table';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_namespace n WHERE n.nspname = w) THEN
    EXECUTE format('CREATE SCHEMA %I', w);
  END IF;
  EXECUTE format('COMMENT ON SCHEMA %I IS %L', w,
    'Workflow state owned by the application: state records, processed message ids, '
    'compensations, timeouts (scheduled rows in outbox schema ' || s || ').');
  PERFORM set_config('search_path', format('%I, %I, pg_catalog, pg_temp', w, s), false);
END
$$;

-- ---------------------------------------------------------------------------
-- Tables
-- ---------------------------------------------------------------------------

CREATE TABLE instances (
  id                     text PRIMARY KEY,
  kind                   text NOT NULL,
  status                 text NOT NULL,
  version                bigint NOT NULL DEFAULT 1,
  correlation_id         text,
  originating_message_id text,
  timeout_message_id     text,
  timeout_due_at         timestamptz,
  data                   jsonb NOT NULL DEFAULT '{}',
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now(),

  CONSTRAINT instances_id_valid
    CHECK (length(id) BETWEEN 1 AND 128 AND id !~ '[[:cntrl:]]'),
  CONSTRAINT instances_kind_valid
    CHECK (length(kind) BETWEEN 1 AND 128 AND kind !~ '[[:cntrl:]]'),
  CONSTRAINT instances_status_valid
    CHECK (length(status) BETWEEN 1 AND 128 AND status !~ '[[:cntrl:]]'),
  CONSTRAINT instances_version_valid CHECK (version >= 1),
  CONSTRAINT instances_correlation_id_valid
    CHECK (length(correlation_id) BETWEEN 1 AND 128 AND correlation_id !~ '[[:cntrl:]]'),
  CONSTRAINT instances_originating_message_id_valid
    CHECK (length(originating_message_id) BETWEEN 1 AND 128 AND originating_message_id !~ '[[:cntrl:]]'),
  CONSTRAINT instances_timeout_message_id_valid
    CHECK (length(timeout_message_id) BETWEEN 1 AND 128 AND timeout_message_id !~ '[[:cntrl:]]'),
  CONSTRAINT instances_timeout_complete
    CHECK ((timeout_message_id IS NULL) = (timeout_due_at IS NULL)),
  CONSTRAINT instances_data_object CHECK (jsonb_typeof(data) = 'object')
);

COMMENT ON TABLE instances IS
  'One state record per workflow (process manager), keyed by a stable domain id such as '
  'order-42, which is also the session_id of its messages. version is the optimistic '
  'concurrency token: save() bumps it. timeout_message_id/timeout_due_at name the current '
  'timeout, a scheduled outbox row.';
COMMENT ON COLUMN instances.kind IS 'Workflow type, e.g. order-fulfilment.';
COMMENT ON COLUMN instances.status IS 'Current business status, owned by the application.';
COMMENT ON COLUMN instances.version IS 'Starts at 1; save() with the expected version bumps it.';
COMMENT ON COLUMN instances.correlation_id IS 'Conversation id captured at start and copied to every message.';
COMMENT ON COLUMN instances.originating_message_id IS 'The message that started the workflow, copied unchanged to every message.';
COMMENT ON COLUMN instances.data IS 'Application data (a JSON object): domain references needed to resume or compensate.';

CREATE TABLE processed_messages (
  workflow_id  text NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
  message_id   text NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workflow_id, message_id),
  CONSTRAINT processed_messages_message_id_valid
    CHECK (length(message_id) BETWEEN 1 AND 128 AND message_id !~ '[[:cntrl:]]')
);

CREATE INDEX processed_messages_processed_at_idx ON processed_messages (processed_at);

COMMENT ON TABLE processed_messages IS
  'Inbound message ids a workflow has already handled (record_processed()), so that a '
  'redelivery changes nothing. Kept until purge_processed() removes them: choose a '
  'retention longer than any redelivery can arrive.';

CREATE TABLE compensations (
  workflow_id text NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
  step        text NOT NULL,
  message_id  text NOT NULL,
  status      text NOT NULL DEFAULT 'pending',
  attempts    int NOT NULL DEFAULT 1,
  last_error  text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workflow_id, step),
  CONSTRAINT compensations_message_id_key UNIQUE (message_id),
  CONSTRAINT compensations_step_valid
    CHECK (length(step) BETWEEN 1 AND 128 AND step !~ '[[:cntrl:]]'),
  CONSTRAINT compensations_message_id_valid
    CHECK (length(message_id) BETWEEN 1 AND 128 AND message_id !~ '[[:cntrl:]]'),
  CONSTRAINT compensations_status_valid CHECK (status IN ('pending', 'completed', 'failed')),
  CONSTRAINT compensations_attempts_valid CHECK (attempts >= 1)
);

COMMENT ON TABLE compensations IS
  'Compensation steps a workflow has issued (e.g. release-inventory), each with its '
  'deterministic message id and status. attempts counts issues of the step: re-issuing '
  'with a new message id (a new ordinal) adds one. A failed step stays visible for retry '
  'or escalation; a completed one is never issued again.';

CREATE FUNCTION touch_updated_at()
RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  NEW.updated_at := now();
  RETURN NEW;
END
$$;

COMMENT ON FUNCTION touch_updated_at() IS
  'BEFORE UPDATE trigger: keeps updated_at current also for direct UPDATEs by applications.';

CREATE TRIGGER instances_touch BEFORE UPDATE ON instances
  FOR EACH ROW EXECUTE FUNCTION touch_updated_at();
CREATE TRIGGER compensations_touch BEFORE UPDATE ON compensations
  FOR EACH ROW EXECUTE FUNCTION touch_updated_at();

-- ---------------------------------------------------------------------------
-- State record
-- ---------------------------------------------------------------------------

CREATE FUNCTION start(
  id                     text,
  kind                   text,
  status                 text,
  correlation_id         text DEFAULT NULL,
  originating_message_id text DEFAULT NULL,
  data                   jsonb DEFAULT '{}')
RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  PERFORM require_text('id', start.id, 128, true);
  PERFORM require_text('kind', start.kind, 128, true);
  PERFORM require_text('status', start.status, 128, true);
  PERFORM require_text('correlation_id', start.correlation_id, 128);
  PERFORM require_text('originating_message_id', start.originating_message_id, 128);
  IF jsonb_typeof(coalesce(start.data, '{}')) <> 'object' THEN
    RAISE EXCEPTION 'data must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  INSERT INTO instances AS i (id, kind, status, correlation_id, originating_message_id, data)
  VALUES (start.id, start.kind, start.status, start.correlation_id,
          start.originating_message_id, coalesce(start.data, '{}'))
  ON CONFLICT ON CONSTRAINT instances_pkey DO NOTHING;
  RETURN FOUND;
END
$$;

COMMENT ON FUNCTION start(text, text, text, text, text, jsonb) IS
  'Creates the state record of workflow id at version 1 and returns true; returns false and '
  'changes nothing if it already exists (a redelivered start message). A concurrent start '
  'waits for the first one and then returns false.';

CREATE FUNCTION save(id text, expected_version bigint, status text, data jsonb DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  new_version bigint;
  current_version bigint;
BEGIN
  PERFORM require_text('status', save.status, 128);
  IF save.data IS NOT NULL AND jsonb_typeof(save.data) <> 'object' THEN
    RAISE EXCEPTION 'data must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  UPDATE instances i
     SET status = coalesce(save.status, i.status),
         data = coalesce(save.data, i.data),
         version = i.version + 1
   WHERE i.id = save.id AND i.version = save.expected_version
  RETURNING i.version INTO new_version;
  IF FOUND THEN
    RETURN new_version;
  END IF;

  SELECT i.version INTO current_version FROM instances i WHERE i.id = save.id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'workflow "%" does not exist: reload and retry', save.id
      USING ERRCODE = 'serialization_failure';
  END IF;
  RAISE EXCEPTION 'workflow "%" is at version %, not %: reload and retry',
      save.id, current_version, save.expected_version
    USING ERRCODE = 'serialization_failure',
          HINT = 'Discard this transition, reload the state and apply the message again.';
END
$$;

COMMENT ON FUNCTION save(text, bigint, text, jsonb) IS
  'Saves a transition: sets status (NULL keeps it) and data (NULL keeps it; otherwise replaces '
  'it) if the record is still at expected_version, and returns the new version. Otherwise, or '
  'if the record does not exist, raises SQLSTATE 40001: roll back, reload and retry. Call it '
  'once per transition, in the transaction that also writes the outgoing messages.';

CREATE FUNCTION record_processed(workflow_id text, message_id text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  PERFORM require_text('message_id', record_processed.message_id, 128, true);
  PERFORM 1 FROM instances i WHERE i.id = record_processed.workflow_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'workflow "%" does not exist', record_processed.workflow_id
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  INSERT INTO processed_messages (workflow_id, message_id)
  VALUES (record_processed.workflow_id, record_processed.message_id)
  ON CONFLICT ON CONSTRAINT processed_messages_pkey DO NOTHING;
  RETURN FOUND;
END
$$;

COMMENT ON FUNCTION record_processed(text, text) IS
  'Records that the workflow handled inbound message_id and returns true; returns false if it '
  'was recorded before (a duplicate delivery: emit nothing). Call it first in the transition; '
  'a concurrent duplicate waits for the first transaction and then returns false.';

CREATE FUNCTION purge_processed(older_than interval, batch_size int DEFAULT 1000)
RETURNS int
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  purged int;
BEGIN
  IF purge_processed.older_than IS NULL OR purge_processed.older_than < interval '0' THEN
    RAISE EXCEPTION 'older_than must be a non-negative interval' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF purge_processed.batch_size IS NULL OR purge_processed.batch_size NOT BETWEEN 1 AND 100000 THEN
    RAISE EXCEPTION 'batch_size must be 1..100000' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  WITH victims AS (
    SELECT p.workflow_id, p.message_id
      FROM processed_messages p
     WHERE p.processed_at < now() - purge_processed.older_than
     ORDER BY p.processed_at
     LIMIT purge_processed.batch_size
       FOR UPDATE SKIP LOCKED
  )
  DELETE FROM processed_messages p
   USING victims v
   WHERE p.workflow_id = v.workflow_id AND p.message_id = v.message_id;
  GET DIAGNOSTICS purged = ROW_COUNT;
  RETURN purged;
END
$$;

COMMENT ON FUNCTION purge_processed(interval, int) IS
  'Retention of processed message ids: deletes at most batch_size records processed more than '
  'older_than ago, oldest first, and returns how many. Call it repeatedly (each call in its '
  'own short transaction) until it returns less than batch_size.';

-- ---------------------------------------------------------------------------
-- Timeouts
-- ---------------------------------------------------------------------------

CREATE FUNCTION set_timeout(
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
  SELECT * INTO state FROM instances i WHERE i.id = set_timeout.workflow_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'workflow "%" does not exist', set_timeout.workflow_id
      USING ERRCODE = 'no_data_found';
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
  'returns the outbox row id, all in the caller''s transaction. Does not change version: call '
  'it in the same transaction as save(). Setting the same timeout again is idempotent.';

CREATE FUNCTION set_timeout(
  workflow_id       text,
  message_id        text,
  due_at            timestamptz,
  destination       text,
  body              jsonb,
  subject           text DEFAULT NULL,
  headers           jsonb DEFAULT '{}',
  parent_message_id text DEFAULT NULL,
  content_type      text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  -- plpgsql, not sql: its plan is cached for the session instead of built per call.
  RETURN set_timeout(
      workflow_id => set_timeout.workflow_id,
      message_id => set_timeout.message_id,
      due_at => set_timeout.due_at,
      destination => set_timeout.destination,
      body => convert_to(set_timeout.body::text, 'UTF8'),
      subject => set_timeout.subject,
      headers => set_timeout.headers,
      parent_message_id => set_timeout.parent_message_id,
      content_type => coalesce(set_timeout.content_type, 'application/json'));
END
$$;

COMMENT ON FUNCTION set_timeout(text, text, timestamptz, text, jsonb, text, jsonb, text, text) IS
  'set_timeout() with a jsonb body (its UTF-8 text); content_type defaults to application/json.';

CREATE FUNCTION set_timeout(
  workflow_id       text,
  message_id        text,
  due_at            timestamptz,
  destination       text,
  body              text,
  subject           text DEFAULT NULL,
  headers           jsonb DEFAULT '{}',
  parent_message_id text DEFAULT NULL,
  content_type      text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  -- plpgsql, not sql: its plan is cached for the session instead of built per call.
  RETURN set_timeout(
      workflow_id => set_timeout.workflow_id,
      message_id => set_timeout.message_id,
      due_at => set_timeout.due_at,
      destination => set_timeout.destination,
      body => convert_to(set_timeout.body, 'UTF8'),
      subject => set_timeout.subject,
      headers => set_timeout.headers,
      parent_message_id => set_timeout.parent_message_id,
      content_type => set_timeout.content_type);
END
$$;

COMMENT ON FUNCTION set_timeout(text, text, timestamptz, text, text, text, jsonb, text, text) IS
  'set_timeout() with a text body (UTF-8 bytes). An untyped literal body picks this overload.';

CREATE FUNCTION clear_timeout(workflow_id text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  state instances;
  cancelled boolean := false;
BEGIN
  SELECT * INTO state FROM instances i WHERE i.id = clear_timeout.workflow_id FOR UPDATE;
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

COMMENT ON FUNCTION clear_timeout(text) IS
  'Disarms the workflow''s timeout: cancels its outbox row and clears timeout_message_id and '
  'timeout_due_at in the caller''s transaction. Returns true if the row was cancelled; false '
  'if no timeout was set or it is already due or published, in which case it will still '
  'arrive and its handler must find it stale. Does not change version.';

-- ---------------------------------------------------------------------------
-- Compensations
-- ---------------------------------------------------------------------------

CREATE FUNCTION record_compensation(workflow_id text, step text, message_id text, status text DEFAULT 'pending')
RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  existing compensations;
BEGIN
  PERFORM require_text('step', record_compensation.step, 128, true);
  PERFORM require_text('message_id', record_compensation.message_id, 128, true);
  IF record_compensation.status IS NULL OR record_compensation.status NOT IN ('pending', 'completed', 'failed') THEN
    RAISE EXCEPTION 'status must be pending, completed or failed' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT * INTO existing FROM compensations c
   WHERE c.workflow_id = record_compensation.workflow_id AND c.step = record_compensation.step
     FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO compensations (workflow_id, step, message_id, status)
    VALUES (record_compensation.workflow_id, record_compensation.step,
            record_compensation.message_id, record_compensation.status);
    RETURN true;
  END IF;
  IF existing.message_id = record_compensation.message_id OR existing.status = 'completed' THEN
    RETURN false;
  END IF;
  UPDATE compensations c
     SET message_id = record_compensation.message_id,
         status = record_compensation.status,
         attempts = c.attempts + 1,
         last_error = NULL
   WHERE c.workflow_id = existing.workflow_id AND c.step = existing.step;
  RETURN true;
END
$$;

COMMENT ON FUNCTION record_compensation(text, text, text, text) IS
  'Records that compensation step was issued with deterministic message_id and returns true. '
  'Returns false and changes nothing for the same message_id again (a replayed transition) or '
  'if the step already completed. A new message_id for an unfinished step (a new ordinal, e.g. '
  'after a failure) re-issues it: status reset, attempts + 1, last_error cleared.';

CREATE FUNCTION set_compensation_status(workflow_id text, step text, status text, last_error text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  IF set_compensation_status.status IS NULL
     OR set_compensation_status.status NOT IN ('pending', 'completed', 'failed') THEN
    RAISE EXCEPTION 'status must be pending, completed or failed' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  UPDATE compensations c
     SET status = set_compensation_status.status,
         last_error = set_compensation_status.last_error
   WHERE c.workflow_id = set_compensation_status.workflow_id
     AND c.step = set_compensation_status.step;
  RETURN FOUND;
END
$$;

COMMENT ON FUNCTION set_compensation_status(text, text, text, text) IS
  'Sets the status (pending, completed, failed) and last_error of a compensation step, e.g. '
  'when its outcome event arrives; returns false if the step was never recorded.';

DO $$
BEGIN
  EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA %I FROM PUBLIC', current_schema());
END
$$;
