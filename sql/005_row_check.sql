-- 005_row_check: the validity rules of messages as one CHECK constraint that calls a function, instead of seventeen CHECK expressions.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql, with the same outboxd.schema setting.
--
-- Why: PostgreSQL reads a table's CHECK expressions back from their stored
-- text at the start of every INSERT or UPDATE statement. The seventeen of
-- 001_outbox.sql made that about 40% of a backend's time in a loop of
-- single-row INSERTs, and every enqueue() paid it (docs/sql.md, "Cost per
-- statement"). One constraint calling a PL/pgSQL function is one short
-- expression to read; the function is compiled once per session.
-- Rules, constraint names, SQLSTATE 23514 and messages stay as they were:
-- the function raises the error PostgreSQL would have raised for the first
-- rule broken (without the DETAIL that lists the row).
--
-- Adding the constraint reads every row once under the table's exclusive
-- lock, so writers wait while a large outbox is checked; every row that met
-- the old CHECKs meets this one.

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

CREATE FUNCTION messages_row_valid(
  message_id text, destination text, session_id text, correlation_id text, parent_message_id text,
  originating_message_id text, subject text, content_type text, traceparent text, headers jsonb,
  ttl interval, due_at timestamptz, status text, attempts int, row_partition int,
  dispatched_at timestamptz, cancelled_at timestamptz)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path FROM CURRENT
AS $$
DECLARE
  broken text;
BEGIN
  -- As in a CHECK, a rule that yields NULL (a NULL column) holds. text_ok()
  -- (001_outbox.sql) is the rule 001's CHECKs wrote out, inlined as SQL.
  IF NOT text_ok(message_id, 128) THEN
    broken := 'messages_message_id_valid';
  ELSIF NOT text_ok(destination, 256) THEN
    broken := 'messages_destination_valid';
  ELSIF NOT text_ok(session_id, 128) THEN
    broken := 'messages_session_id_valid';
  ELSIF NOT text_ok(correlation_id, 128) THEN
    broken := 'messages_correlation_id_valid';
  ELSIF NOT text_ok(parent_message_id, 128) THEN
    broken := 'messages_parent_message_id_valid';
  ELSIF NOT text_ok(originating_message_id, 128) THEN
    broken := 'messages_originating_message_id_valid';
  ELSIF NOT text_ok(subject, 256) THEN
    broken := 'messages_subject_valid';
  ELSIF NOT text_ok(content_type, 256) THEN
    broken := 'messages_content_type_valid';
  -- W3C trace context: version-traceid-parentid-flags in lowercase hex; later
  -- versions may append fields, hence the optional tail and the 256 bound.
  ELSIF NOT (traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[^[:cntrl:]]*)?$'
             AND length(traceparent) <= 256) THEN
    broken := 'messages_traceparent_valid';
  -- AMQP application-properties carry simple values only.
  ELSIF NOT (jsonb_typeof(headers) = 'object'
             AND NOT jsonb_path_exists(headers, '$.* ? (@.type() == "object" || @.type() == "array")')) THEN
    broken := 'messages_headers_valid';
  -- AMQP header.ttl is a uint in milliseconds.
  ELSIF NOT (ttl BETWEEN interval '1 millisecond' AND interval '4294967.295 seconds') THEN
    broken := 'messages_ttl_valid';
  ELSIF NOT isfinite(due_at) THEN
    broken := 'messages_due_at_finite';
  ELSIF NOT (status IN ('pending', 'dispatched', 'parked', 'cancelled')) THEN
    broken := 'messages_status_valid';
  ELSIF NOT (attempts >= 0) THEN
    broken := 'messages_attempts_valid';
  ELSIF NOT (row_partition >= 0) THEN
    broken := 'messages_partition_valid';
  -- Retention purges finished rows by these timestamps (messages_finished_idx);
  -- a finished row without one would never be purged.
  ELSIF NOT (status <> 'dispatched' OR dispatched_at IS NOT NULL) THEN
    broken := 'messages_dispatched_at_set';
  ELSIF NOT (status <> 'cancelled' OR cancelled_at IS NOT NULL) THEN
    broken := 'messages_cancelled_at_set';
  END IF;
  IF broken IS NOT NULL THEN
    RAISE EXCEPTION 'new row for relation "messages" violates check constraint "%"', broken
      USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'messages', SCHEMA = current_schema();
  END IF;
  RETURN true;
END
$$;

COMMENT ON FUNCTION messages_row_valid(text, text, text, text, text, text, text, text, text, jsonb, interval,
                                       timestamptz, text, int, int, timestamptz, timestamptz) IS
  'CHECK of messages (constraint messages_row_valid): true, or SQLSTATE 23514 naming the rule broken '
  '(messages_<column>_valid, messages_due_at_finite, messages_dispatched_at_set, messages_cancelled_at_set).';

ALTER TABLE messages
  DROP CONSTRAINT messages_message_id_valid,
  DROP CONSTRAINT messages_destination_valid,
  DROP CONSTRAINT messages_session_id_valid,
  DROP CONSTRAINT messages_correlation_id_valid,
  DROP CONSTRAINT messages_parent_message_id_valid,
  DROP CONSTRAINT messages_originating_message_id_valid,
  DROP CONSTRAINT messages_subject_valid,
  DROP CONSTRAINT messages_content_type_valid,
  DROP CONSTRAINT messages_traceparent_valid,
  DROP CONSTRAINT messages_headers_valid,
  DROP CONSTRAINT messages_ttl_valid,
  DROP CONSTRAINT messages_due_at_finite,
  DROP CONSTRAINT messages_status_valid,
  DROP CONSTRAINT messages_attempts_valid,
  DROP CONSTRAINT messages_partition_valid,
  DROP CONSTRAINT messages_dispatched_at_set,
  DROP CONSTRAINT messages_cancelled_at_set,
  ADD CONSTRAINT messages_row_valid CHECK (messages_row_valid(
    message_id, destination, session_id, correlation_id, parent_message_id, originating_message_id, subject,
    content_type, traceparent, headers, ttl, due_at, status, attempts, partition, dispatched_at, cancelled_at));

-- A CHECK runs with the privileges of whoever inserts or updates: writers
-- (plain INSERT) and dispatchers (marking, backing off) call it; nobody else.
REVOKE ALL ON FUNCTION messages_row_valid(text, text, text, text, text, text, text, text, text, jsonb, interval,
                                          timestamptz, text, int, int, timestamptz, timestamptz) FROM PUBLIC;

DO $$
BEGIN
  EXECUTE format('GRANT EXECUTE ON FUNCTION messages_row_valid(text, text, text, text, text, text, text, text, text, '
                 'jsonb, interval, timestamptz, text, int, int, timestamptz, timestamptz) TO %I, %I',
                 current_schema() || '_writer', current_schema() || '_dispatcher');
END
$$;
