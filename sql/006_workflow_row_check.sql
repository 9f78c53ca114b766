-- 006_workflow_row_check: the validity rules of instances and compensations as one CHECK constraint each, calling a function.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 002_workflow.sql and 003_roles.sql, with the same outboxd.schema and
-- outboxd.workflow_schema settings.
--
-- Why: as for messages in 005_row_check.sql, PostgreSQL reads every CHECK
-- expression back from its stored text at the start of each INSERT or UPDATE
-- statement, and save() and set_timeout() update an instance on every
-- transition. Rules, constraint names, SQLSTATE 23514 and messages stay as
-- they were. As in 005, adding each constraint reads the table once under its
-- exclusive lock.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  IF to_regclass(format('%I.instances', w)) IS NULL OR to_regclass(format('%I.messages', s)) IS NULL THEN
    RAISE EXCEPTION 'schemas "%" and "%" not found: apply 001_outbox.sql and 002_workflow.sql first', s, w
      USING ERRCODE = 'undefined_table';
  END IF;
  PERFORM set_config('search_path', format('%I, %I, pg_catalog, pg_temp', w, s), false);
END
$$;

CREATE FUNCTION instances_row_valid(
  id text, kind text, status text, version bigint, correlation_id text, originating_message_id text,
  timeout_message_id text, timeout_due_at timestamptz, data jsonb)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path FROM CURRENT
AS $$
DECLARE
  broken text;
BEGIN
  -- As in a CHECK, a rule that yields NULL (a NULL column) holds. text_ok()
  -- (001_outbox.sql) is the rule 002's CHECKs wrote out, inlined as SQL.
  IF NOT text_ok(id, 128) THEN
    broken := 'instances_id_valid';
  ELSIF NOT text_ok(kind, 128) THEN
    broken := 'instances_kind_valid';
  ELSIF NOT text_ok(status, 128) THEN
    broken := 'instances_status_valid';
  ELSIF NOT (version >= 1) THEN
    broken := 'instances_version_valid';
  ELSIF NOT text_ok(correlation_id, 128) THEN
    broken := 'instances_correlation_id_valid';
  ELSIF NOT text_ok(originating_message_id, 128) THEN
    broken := 'instances_originating_message_id_valid';
  ELSIF NOT text_ok(timeout_message_id, 128) THEN
    broken := 'instances_timeout_message_id_valid';
  ELSIF NOT ((timeout_message_id IS NULL) = (timeout_due_at IS NULL)) THEN
    broken := 'instances_timeout_complete';
  ELSIF NOT (jsonb_typeof(data) = 'object') THEN
    broken := 'instances_data_object';
  END IF;
  IF broken IS NOT NULL THEN
    RAISE EXCEPTION 'new row for relation "instances" violates check constraint "%"', broken
      USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'instances', SCHEMA = current_schema();
  END IF;
  RETURN true;
END
$$;

COMMENT ON FUNCTION instances_row_valid(text, text, text, bigint, text, text, text, timestamptz, jsonb) IS
  'CHECK of instances (constraint instances_row_valid): true, or SQLSTATE 23514 naming the rule broken.';

CREATE FUNCTION compensations_row_valid(step text, message_id text, status text, attempts int)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path FROM CURRENT
AS $$
DECLARE
  broken text;
BEGIN
  IF NOT text_ok(step, 128) THEN
    broken := 'compensations_step_valid';
  ELSIF NOT text_ok(message_id, 128) THEN
    broken := 'compensations_message_id_valid';
  ELSIF NOT (status IN ('pending', 'completed', 'failed')) THEN
    broken := 'compensations_status_valid';
  ELSIF NOT (attempts >= 1) THEN
    broken := 'compensations_attempts_valid';
  END IF;
  IF broken IS NOT NULL THEN
    RAISE EXCEPTION 'new row for relation "compensations" violates check constraint "%"', broken
      USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'compensations', SCHEMA = current_schema();
  END IF;
  RETURN true;
END
$$;

COMMENT ON FUNCTION compensations_row_valid(text, text, text, int) IS
  'CHECK of compensations (constraint compensations_row_valid): true, or SQLSTATE 23514 naming the rule broken.';

ALTER TABLE instances
  DROP CONSTRAINT instances_id_valid,
  DROP CONSTRAINT instances_kind_valid,
  DROP CONSTRAINT instances_status_valid,
  DROP CONSTRAINT instances_version_valid,
  DROP CONSTRAINT instances_correlation_id_valid,
  DROP CONSTRAINT instances_originating_message_id_valid,
  DROP CONSTRAINT instances_timeout_message_id_valid,
  DROP CONSTRAINT instances_timeout_complete,
  DROP CONSTRAINT instances_data_object,
  ADD CONSTRAINT instances_row_valid CHECK (instances_row_valid(
    id, kind, status, version, correlation_id, originating_message_id, timeout_message_id, timeout_due_at, data));

ALTER TABLE compensations
  DROP CONSTRAINT compensations_step_valid,
  DROP CONSTRAINT compensations_message_id_valid,
  DROP CONSTRAINT compensations_status_valid,
  DROP CONSTRAINT compensations_attempts_valid,
  ADD CONSTRAINT compensations_row_valid CHECK (compensations_row_valid(step, message_id, status, attempts));

-- Applications write workflow state as <schema>_writer; nobody else needs these.
REVOKE ALL ON FUNCTION instances_row_valid(text, text, text, bigint, text, text, text, timestamptz, jsonb),
                       compensations_row_valid(text, text, text, int) FROM PUBLIC;

DO $$
BEGIN
  EXECUTE format('GRANT EXECUTE ON FUNCTION instances_row_valid(text, text, text, bigint, text, text, text, '
                 'timestamptz, jsonb), compensations_row_valid(text, text, text, int) TO %I',
                 coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox') || '_writer');
END
$$;
