-- 009_writer_isolation: every row records its writer; enqueue(), cancel() and plain INSERTs keep writers apart and refuse headers and destinations outboxd could not send safely.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 008, with the same outboxd.schema setting.
--
-- Why: applications sharing an outbox are separate trust domains. Before
-- this, enqueue() (a security definer) answered a conflicting message_id with
-- the names of the columns that differed, an oracle for another
-- application's row; cancel() cancelled anyone's row by its guessable id;
-- headers such as {"a": [1]}, {"a": 1e400} or {"x-opt-...": 1} were stored and
-- then retried for minutes before being parked; and a destination such as
-- "/exchange/amq.rabbitmq.trace" reached any broker address.
--
-- What changes:
--   - messages.writer: the login role (session_user) that inserted the row,
--     filled by its default for enqueue() and plain INSERTs alike (writers may
--     not insert the column). Rows written before this migration have none and
--     belong to no writer: a DBA may assign them (docs/sql.md, Roles).
--   - enqueue() compares a repeated message_id only with the caller's own
--     row; another writer's row, or different content, raises the same
--     23505 without DETAIL. cancel() sees only the caller's own rows, through
--     lock_waiting_row(), which reschedule() (010) shares.
--   - headers_problem() and destination_problem() hold the rules (docs/sql.md,
--     "Headers" and "Destinations"), behind the inlined quick looks
--     headers_suspect() and address_or_reserved(). enqueue() raises 22023
--     naming the rule, a plain INSERT 23514 (constraints
--     messages_headers_valid and messages_destination_valid) from the insert
--     trigger messages_set_partition(): rows already stored and the
--     dispatcher's updates are not checked again, so an old row that breaks
--     the rules can still be parked.
--   - settings.allowed_address_prefixes: full broker addresses and reserved
--     names a DBA lets writers use (empty: none).

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

-- Two steps, so that existing rows keep NULL instead of the migrating role.
ALTER TABLE messages ADD COLUMN writer text;
ALTER TABLE messages ALTER COLUMN writer SET DEFAULT session_user;

COMMENT ON COLUMN messages.writer IS
  'Login role (session_user) that inserted the row; enqueue() and cancel() see only the caller''s own rows. '
  'NULL for rows written before 009_writer_isolation.sql: no writer''s.';

ALTER TABLE settings ADD COLUMN allowed_address_prefixes text[] NOT NULL DEFAULT '{}';

COMMENT ON COLUMN settings.allowed_address_prefixes IS
  'Destinations that are full broker addresses ("/..." or "scheme://...") or start with a reserved name '
  '(amq., activemq., $) are refused unless they start with one of these prefixes. Set by the DBA; empty: none.';

-- ---------------------------------------------------------------------------
-- The rules
-- ---------------------------------------------------------------------------

CREATE FUNCTION headers_problem(headers jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path FROM CURRENT
AS $$
DECLARE
  item record;
  shown text;
  number numeric;
BEGIN
  -- The same rules as lib/amqp/headers_mapping.cpp, checked against one table
  -- of cases (tests/acceptance/headers.tsv): a row accepted here is sendable.
  IF jsonb_typeof(headers) IS DISTINCT FROM 'object' THEN
    RETURN 'not a JSON object';
  END IF;
  FOR item IN SELECT e.key, e.value, jsonb_typeof(e.value) AS kind FROM jsonb_each(headers) e LOOP
    -- Keys reach logs and error messages: show them JSON-escaped, shortened.
    shown := to_jsonb(left(item.key, 64))::text;
    IF NOT (item.key ~ '^[^\u0001-\u001f\u007f-\u009f]+$' AND length(item.key) <= 128) THEN
      RETURN format('key %s: keys are 1..128 characters without control characters', shown);
    END IF;
    -- AMQP 1.0 annotations, Artemis internals and management, JMS, RabbitMQ's
    -- own headers and its CC/BCC extra routes.
    IF item.key ~* '^(x-opt-|x-death|x-delay|x-received-from|x-first-death-|x-last-death-|x-delivery-count|x-stream-|x-amqp-|x-shovelled|x-mqtt-|_amq_|__amq_|__hdr_|_hq_|jms|amqp:|activemq\.)'
       OR item.key ~* '^(cc|bcc)$' THEN
      RETURN format('key %s: reserved by the AMQP specification or a broker', shown);
    END IF;
    IF item.kind IN ('array', 'object') THEN
      RETURN format('key %s: arrays and objects are not supported', shown);
    END IF;
    IF item.kind = 'number' THEN
      -- jsonb prints numbers without exponent: outboxd reads a number
      -- without a point as a 64-bit integer, one with a point as a double.
      number := item.value::text::numeric;
      IF strpos(item.value::text, '.') = 0 THEN
        IF number NOT BETWEEN -9223372036854775808 AND 9223372036854775807 THEN
          RETURN format('key %s: integers must fit a signed 64-bit long', shown);
        END IF;
      ELSIF abs(number) > 1.7976931348623157e308 THEN
        RETURN format('key %s: numbers must fit a double', shown);
      END IF;
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;

COMMENT ON FUNCTION headers_problem(jsonb) IS
  'NULL if headers can be sent as AMQP application-properties, else what is wrong: a JSON object whose '
  'keys are 1..128 characters without control characters and outside the reserved namespaces, and whose '
  'values are strings, booleans, null, integers of a signed 64-bit long or numbers with a point that fit a double.';

-- The quick look that spares most rows the call above: true for every
-- document headers_problem() refuses (and for a few it accepts, such as a
-- double beyond a long). A SQL-standard body without SET is bound at
-- creation and inlined into the caller's plan: one jsonpath pass instead of a
-- function with a statement per key, a third of the cost.
CREATE FUNCTION headers_suspect(headers jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN jsonb_typeof(headers) IS DISTINCT FROM 'object'
    OR jsonb_path_exists(headers, 'strict $.keyvalue() ? (
         @.value.type() == "array" || @.value.type() == "object"
         || @.key like_regex "^$|[\\u0001-\\u001f\\u007f-\\u009f]|^.{129}|^(x-opt-|x-death|x-delay|x-received-from|x-first-death-|x-last-death-|x-delivery-count|x-stream-|x-amqp-|x-shovelled|x-mqtt-|_amq_|__amq_|__hdr_|_hq_|jms|amqp:|activemq\\.|cc$|bcc$)" flag "i"
         || @.value.type() == "number" && (@.value > 9223372036854775807 || @.value < -9223372036854775808))',
         '{}', true);

COMMENT ON FUNCTION headers_suspect(jsonb) IS
  'False if headers certainly meet the rules of headers_problem(); true if headers_problem() must look.';

-- SQL-standard body, no SET: bound at creation and inlined into the
-- caller's plan, so that the usual plain name costs no function call.
CREATE FUNCTION address_or_reserved(destination text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Mirrors lib/amqp/destination.cpp (is_full_address): such a destination is
-- sent as it is, past the broker profile's mapping. Reserved names reach
-- broker internals even through the mapping (management, advisories, amq.*
-- on RabbitMQ, $management on Azure).
RETURN left(destination, 1) = '/' OR strpos(destination, '://') > 0 OR destination ~* '^(amq\.|activemq\.|\$)';

COMMENT ON FUNCTION address_or_reserved(text) IS
  'True if destination is a full broker address (starts with "/" or holds "scheme://") or a reserved name '
  '(starts with amq., activemq. or $, compared without case): writers need an allowed prefix for it.';

CREATE FUNCTION destination_problem(destination text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
BEGIN
  IF NOT address_or_reserved(destination) THEN
    RETURN NULL;
  END IF;
  IF EXISTS (SELECT FROM settings st, unnest(st.allowed_address_prefixes) p
              WHERE p <> '' AND starts_with(destination, p)) THEN
    RETURN NULL;
  END IF;
  RETURN 'a full broker address or a reserved name needs a prefix listed in settings.allowed_address_prefixes';
END
$$;

COMMENT ON FUNCTION destination_problem(text) IS
  'NULL if writers may use destination, else why not: a plain name is fine; one starting with "/", holding '
  '"://" or starting with amq., activemq. or $ must start with a prefix in settings.allowed_address_prefixes.';

CREATE FUNCTION check_inserted_row(destination text, headers jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  problem text := headers_problem(headers);
  broken text := 'messages_headers_valid';
BEGIN
  IF problem IS NULL THEN
    problem := destination_problem(destination);
    broken := 'messages_destination_valid';
  END IF;
  IF problem IS NOT NULL THEN
    RAISE EXCEPTION 'new row for relation "messages" violates check constraint "%"', broken
      USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'messages', SCHEMA = current_schema(),
            DETAIL = problem;
  END IF;
END
$$;

COMMENT ON FUNCTION check_inserted_row(text, jsonb) IS
  'Internal, called by messages_set_partition() for rows with headers or a destination that may be an address: '
  'SQLSTATE 23514 naming messages_headers_valid or messages_destination_valid, the problem in DETAIL.';

-- ---------------------------------------------------------------------------
-- The insert trigger checks them
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION write_partition_function(n int, wakeup boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
  look boolean := coalesce(wakeup, true);
BEGIN
  IF n IS NULL OR n NOT BETWEEN 1 AND 4096 THEN
    RAISE EXCEPTION 'partition count must be 1..4096' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Runs for every inserted row, so it is as cheap as it gets: the count and
  -- the channel are literals, and instead of SET search_path (a GUC save and
  -- restore per call, about as costly as the body) every name in the body is
  -- qualified, which keeps a security definer safe from the caller's
  -- search_path (pg_temp included). The header and destination rules cost a
  -- call only for rows whose headers look suspect or whose destination is an
  -- address or a reserved name (headers_suspect() and address_or_reserved()
  -- are inlined).
  EXECUTE format($def$
CREATE OR REPLACE FUNCTION %1$I.messages_set_partition()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
AS $body$
BEGIN
  IF (NEW.headers OPERATOR(pg_catalog.<>) '{}'::pg_catalog.jsonb AND %1$I.headers_suspect(NEW.headers))
     OR %1$I.address_or_reserved(NEW.destination) THEN
    PERFORM %1$I.check_inserted_row(NEW.destination, NEW.headers);
  END IF;
  NEW.partition := (pg_catalog.hashtext(coalesce(NEW.session_id, NEW.message_id))::pg_catalog.int8
                    OPERATOR(pg_catalog.&) 2147483647) OPERATOR(pg_catalog.%%) %2$s;%3$s
  RETURN NEW;
END
$body$
$def$, current_schema(), n,
    CASE WHEN look THEN format($wake$
  -- NOTIFY serialises commits, so pay for it only while a dispatcher sleeps.
  IF EXISTS (SELECT FROM %1$I.instances i WHERE i.idle) THEN
    PERFORM pg_catalog.pg_notify(%2$L, '');
  END IF;$wake$, current_schema(), current_schema() || '_wakeup')
    ELSE '' END);
  EXECUTE format('COMMENT ON FUNCTION %I.messages_set_partition() IS %L', current_schema(),
    format('BEFORE INSERT row trigger of messages: checks headers and destination (check_inserted_row), '
           'partition = (hashtext(coalesce(session_id, message_id)) & 2147483647) %% %s%s. '
           'Generated by write_partition_function(); do not edit. Security definer (writers '
           'may not read instances or settings); its body names only qualified objects instead of '
           'pinning search_path.', n,
           CASE WHEN look THEN ', then NOTIFY ' || current_schema() || '_wakeup '
                'if some instance is idle' ELSE ' (no wake-up check)' END));
END
$fn$;

DO $$
BEGIN
  PERFORM write_partition_function(partition_count) FROM settings;
END
$$;

-- ---------------------------------------------------------------------------
-- enqueue / cancel see only the caller's rows
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION enqueue(
  destination            text,
  message_id             text,
  body                   bytea DEFAULT '',
  session_id             text DEFAULT NULL,
  correlation_id         text DEFAULT NULL,
  parent_message_id      text DEFAULT NULL,
  originating_message_id text DEFAULT NULL,
  subject                text DEFAULT NULL,
  content_type           text DEFAULT NULL,
  headers                jsonb DEFAULT '{}',
  ttl                    interval DEFAULT NULL,
  traceparent            text DEFAULT NULL,
  due_at                 timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  v_body    bytea := coalesce(enqueue.body, '\x'::bytea);
  v_headers jsonb := coalesce(enqueue.headers, '{}'::jsonb);
  v_due     timestamptz := coalesce(enqueue.due_at, now());
  new_id    bigint;
  old       messages;
  problem   text;
BEGIN
  -- One inlined test for the common case; only a failure pays for naming the field.
  IF NOT (coalesce(text_ok(enqueue.message_id, 128), false)
          AND coalesce(text_ok(enqueue.destination, 256), false)
          AND coalesce(text_ok(enqueue.session_id, 128), true)
          AND coalesce(text_ok(enqueue.correlation_id, 128), true)
          AND coalesce(text_ok(enqueue.parent_message_id, 128), true)
          AND coalesce(text_ok(enqueue.originating_message_id, 128), true)
          AND coalesce(text_ok(enqueue.subject, 256), true)
          AND coalesce(text_ok(enqueue.content_type, 256), true)) THEN
    PERFORM require_text('message_id', enqueue.message_id, 128, true);
    PERFORM require_text('destination', enqueue.destination, 256, true);
    PERFORM require_text('session_id', enqueue.session_id, 128);
    PERFORM require_text('correlation_id', enqueue.correlation_id, 128);
    PERFORM require_text('parent_message_id', enqueue.parent_message_id, 128);
    PERFORM require_text('originating_message_id', enqueue.originating_message_id, 128);
    PERFORM require_text('subject', enqueue.subject, 256);
    PERFORM require_text('content_type', enqueue.content_type, 256);
  END IF;
  IF v_headers <> '{}' AND headers_suspect(v_headers) THEN
    problem := headers_problem(v_headers);
    IF problem IS NOT NULL THEN
      RAISE EXCEPTION 'headers must be a JSON object whose values are strings, numbers, booleans or null'
        USING ERRCODE = 'invalid_parameter_value', DETAIL = problem;
    END IF;
  END IF;
  IF address_or_reserved(enqueue.destination) THEN
    problem := destination_problem(enqueue.destination);
    IF problem IS NOT NULL THEN
      RAISE EXCEPTION 'destination must be a plain name' USING ERRCODE = 'invalid_parameter_value', DETAIL = problem;
    END IF;
  END IF;
  IF enqueue.ttl NOT BETWEEN interval '1 millisecond' AND interval '4294967.295 seconds' THEN
    RAISE EXCEPTION 'ttl must be between 1 millisecond and 4294967295 milliseconds'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF enqueue.traceparent IS NOT NULL AND NOT (
       length(enqueue.traceparent) BETWEEN 55 AND 256
       AND enqueue.traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[^[:cntrl:]]*)?$') THEN
    RAISE EXCEPTION 'traceparent must be a W3C traceparent (version-traceid-parentid-flags in lowercase hex, at most 256 characters)'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF NOT isfinite(v_due) THEN
    RAISE EXCEPTION 'due_at must be finite' USING ERRCODE = 'invalid_parameter_value';
  END IF;

  -- Insert, or find the row that won; a row purged in between means try again.
  FOR attempt IN 1..3 LOOP
    INSERT INTO messages AS m (
      message_id, destination, session_id, correlation_id, parent_message_id,
      originating_message_id, subject, content_type, headers, body, ttl, traceparent, due_at)
    VALUES (
      enqueue.message_id, enqueue.destination, enqueue.session_id, enqueue.correlation_id,
      enqueue.parent_message_id, enqueue.originating_message_id, enqueue.subject,
      enqueue.content_type, v_headers, v_body, enqueue.ttl, enqueue.traceparent, v_due)
    ON CONFLICT ON CONSTRAINT messages_message_id_key DO NOTHING
    RETURNING m.id INTO new_id;
    IF new_id IS NOT NULL THEN
      RETURN new_id;
    END IF;

    SELECT * INTO old FROM messages m WHERE m.message_id = enqueue.message_id;
    IF FOUND THEN
      -- Another writer's row is never compared, and the error says no more
      -- than for different content: nothing about a row the caller may not read.
      IF old.writer IS DISTINCT FROM session_user
         OR old.destination IS DISTINCT FROM enqueue.destination
         OR old.body IS DISTINCT FROM v_body
         OR old.session_id IS DISTINCT FROM enqueue.session_id
         OR old.correlation_id IS DISTINCT FROM enqueue.correlation_id
         OR old.parent_message_id IS DISTINCT FROM enqueue.parent_message_id
         OR old.originating_message_id IS DISTINCT FROM enqueue.originating_message_id
         OR old.subject IS DISTINCT FROM enqueue.subject
         OR old.content_type IS DISTINCT FROM enqueue.content_type
         OR old.headers IS DISTINCT FROM v_headers
         OR old.ttl IS DISTINCT FROM enqueue.ttl
         OR old.traceparent IS DISTINCT FROM enqueue.traceparent
         -- A default due_at means "now", which differs on every call: compare only a given one.
         OR (enqueue.due_at IS NOT NULL AND old.due_at IS DISTINCT FROM enqueue.due_at) THEN
        RAISE EXCEPTION 'message_id "%" already exists with different content', enqueue.message_id
          USING ERRCODE = 'unique_violation',
                HINT = 'A message_id names one message: retry with the same content, or use a new id.';
      END IF;
      RETURN old.id;
    END IF;
  END LOOP;
  RAISE EXCEPTION 'message_id "%" is being inserted and deleted concurrently', enqueue.message_id
    USING ERRCODE = 'serialization_failure', HINT = 'Retry the transaction.';
END
$$;

COMMENT ON FUNCTION enqueue(text, text, bytea, text, text, text, text, text, text, jsonb, interval, text, timestamptz) IS
  'Adds a message to the outbox in the caller''s transaction and returns its row id. '
  'due_at NULL means now (immediate); a later due_at schedules it. Idempotent on message_id '
  'for the same writer (session_user): the same content again returns the existing id and inserts '
  'nothing; different content (due_at compared only when given), or the id taken by another writer, '
  'raises SQLSTATE 23505 without details. Invalid fields raise SQLSTATE 22023 naming the field. '
  'Idempotency lasts as long as the row is kept (retention).';

CREATE FUNCTION lock_waiting_row(message_id text, OUT row_id bigint, OUT waiting boolean)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  target messages;
BEGIN
  -- Lock first, then look at the clock. The scheduled claim locks the rows it
  -- takes (FOR UPDATE SKIP LOCKED); if it holds this one, we wait for it and
  -- then see that the row is due. A plain UPDATE ... WHERE due_at > clock
  -- would not do: it evaluates the condition before waiting, and after a
  -- lock that changed nothing it does not evaluate it again.
  -- clock_timestamp(), not now(): the row may have fallen due while the
  -- caller's transaction ran, and then it may be in flight already.
  -- The first look takes no lock, so that a row we leave alone is not held
  -- back from the claim until the caller commits. Another writer's row is
  -- "not found".
  SELECT * INTO target FROM messages m
   WHERE m.message_id = lock_waiting_row.message_id AND m.writer = session_user;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  row_id := target.id;
  waiting := target.status = 'pending' AND target.due_at > clock_timestamp();
  IF NOT waiting THEN
    RETURN;
  END IF;
  SELECT * INTO target FROM messages m WHERE m.id = row_id FOR UPDATE;
  IF NOT FOUND THEN
    row_id := NULL;  -- purged meanwhile
    waiting := NULL;
    RETURN;
  END IF;
  waiting := target.status = 'pending' AND target.due_at > clock_timestamp();
END
$$;

COMMENT ON FUNCTION lock_waiting_row(text) IS
  'Internal, for cancel() and reschedule(): the caller''s row with this message_id (row_id NULL if none) '
  'and whether it is still waiting (pending, not yet due by the clock); a waiting row is locked FOR UPDATE.';

CREATE OR REPLACE FUNCTION cancel(message_id text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  target record;
BEGIN
  SELECT * INTO target FROM lock_waiting_row(cancel.message_id);
  IF NOT coalesce(target.waiting, false) THEN
    RETURN false;
  END IF;
  UPDATE messages m SET status = 'cancelled', cancelled_at = clock_timestamp() WHERE m.id = target.row_id;
  RETURN true;
END
$$;

COMMENT ON FUNCTION cancel(text) IS
  'Cancels a pending message of the caller (writer = session_user) whose due_at is still in the future '
  'and returns true; returns false if it is unknown, another writer''s, already dispatched, cancelled or '
  'parked, or already due (then it may be in flight and will be published). Cancel before due_at and let '
  'workflow state decide afterwards: the receiver of a late timeout checks state and ignores it.';

-- Pure rules, nothing to hide: applications may check a document before they write it.
REVOKE ALL ON FUNCTION headers_problem(jsonb), headers_suspect(jsonb), address_or_reserved(text), destination_problem(text),
                       check_inserted_row(text, jsonb), lock_waiting_row(text) FROM PUBLIC;
DO $$
BEGIN
  EXECUTE format('GRANT EXECUTE ON FUNCTION headers_problem(jsonb) TO %I', current_schema() || '_writer');
END
$$;
