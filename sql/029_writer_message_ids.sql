-- 029_writer_message_ids: a message id is its writer's own: two writers may use the same id, neither can take, probe or poison the other's, and consumers and operators tell them apart.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 028, with the same outboxd.schema setting.
--
-- Why: message_id was unique across the whole outbox. A writer that enqueued
-- another application's next id first made that application's own business
-- transaction fail with 23505, learned from 23505 against success whether an
-- id of the other's existed, and got its row published under the other's
-- message id, which the other's consumer then recorded in its inbox, dropping
-- the real message later as a duplicate.
--
-- What changes:
--   - messages_message_id_key is UNIQUE NULLS NOT DISTINCT (message_id,
--     writer): enqueue() and INSERT ... ON CONFLICT DO NOTHING conflict only
--     with the caller's own rows. Rows of no writer (before 009) keep one
--     namespace of their own.
--   - enqueue() compares a repeated id with the caller's own row only.
--   - The daemon sends the writer as the application property
--     outboxd_writer, and writers may not use header keys that start with
--     outboxd_ (headers_problem(), headers_suspect()); a stored row with such
--     a header is parked when it is sent, as any other unsendable row.
--   - received_messages.sender and record_received(consumer, message_id,
--     sender): the inbox dedupes on the sending writer (the outboxd_writer
--     property) beside the id. The two-argument form records sender '' and so
--     keeps one namespace for every sender: right only for a consumer that one
--     writer alone can reach. The same for a workflow's processed ids:
--     processed_messages.sender and record_processed(workflow_id,
--     message_id, sender).
--   (Runs with the same outboxd.workflow_schema setting as 002.)
--   - The operator functions (requeue_parked, skip_parked, replay,
--     fire_scheduled) take a writer ('' names the rows of no writer): a
--     message id or a session id that names rows of more than one writer
--     among the rows they would change is refused (21000) unless the writer
--     is named.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regprocedure(format('%I.name_os_user(text)', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 027: apply 001_outbox.sql to 028 first', s
      USING ERRCODE = 'undefined_function';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

-- ---------------------------------------------------------------------------
-- The key, and enqueue() against the caller's rows only
-- ---------------------------------------------------------------------------

ALTER TABLE messages
  DROP CONSTRAINT messages_message_id_key,
  ADD CONSTRAINT messages_message_id_key UNIQUE NULLS NOT DISTINCT (message_id, writer);

COMMENT ON COLUMN messages.message_id IS
  'Deterministic id chosen by the application; AMQP message-id. Unique per writer: two writers may use the same id.';


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

    -- The caller's own row: another writer's rows with this id are not in its way.
    SELECT * INTO old FROM messages m WHERE m.message_id = enqueue.message_id AND m.writer = session_user;
    IF FOUND THEN
      IF old.destination IS DISTINCT FROM enqueue.destination
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
  'nothing; different content (due_at compared only when given) raises SQLSTATE 23505 without details. '
  'Another writer''s rows are not compared: its id is its own. Invalid fields raise SQLSTATE 22023 naming the field. '
  'Idempotency lasts as long as the row is kept (retention).';

-- ---------------------------------------------------------------------------
-- Header keys outboxd_* are the daemon's
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION headers_problem(headers jsonb)
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
    -- The daemon's own properties (outboxd_writer).
    IF item.key ~* '^outboxd_' THEN
      RETURN format('key %s: reserved for outboxd''s own properties', shown);
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
  'keys are 1..128 characters without control characters and outside the reserved namespaces (outboxd_ '
  'included), and whose values are strings, booleans, null, integers of a signed 64-bit long or numbers with a point that fit a double.';

-- The quick look that spares most rows the call above: true for every
-- document headers_problem() refuses (and for a few it accepts, such as a
-- double beyond a long). A SQL-standard body without SET is bound at
-- creation and inlined into the caller's plan: one jsonpath pass instead of a
-- function with a statement per key, a third of the cost.
CREATE OR REPLACE FUNCTION headers_suspect(headers jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN jsonb_typeof(headers) IS DISTINCT FROM 'object'
    OR jsonb_path_exists(headers, 'strict $.keyvalue() ? (
         @.value.type() == "array" || @.value.type() == "object"
         || @.key like_regex "^$|[\\u0001-\\u001f\\u007f-\\u009f]|^.{129}|^(x-opt-|x-death|x-delay|x-received-from|x-first-death-|x-last-death-|x-delivery-count|x-stream-|x-amqp-|x-shovelled|x-mqtt-|_amq_|__amq_|__hdr_|_hq_|jms|amqp:|activemq\\.|outboxd_|cc$|bcc$)" flag "i"
         || @.value.type() == "number" && (@.value > 9223372036854775807 || @.value < -9223372036854775808))',
         '{}', true);

COMMENT ON FUNCTION headers_suspect(jsonb) IS
  'False if headers certainly meet the rules of headers_problem(); true if headers_problem() must look.';

-- ---------------------------------------------------------------------------
-- The inbox dedupes on the sending writer too
-- ---------------------------------------------------------------------------

ALTER TABLE received_messages
  ADD COLUMN sender text NOT NULL DEFAULT '',
  ADD CONSTRAINT received_messages_sender_valid CHECK (length(sender) <= 128 AND sender !~ '[[:cntrl:]]'),
  DROP CONSTRAINT received_messages_pkey,
  ADD CONSTRAINT received_messages_pkey PRIMARY KEY (consumer, message_id, writer, sender);

COMMENT ON COLUMN received_messages.sender IS
  'The writer that sent the message (its outboxd_writer property), as record_received() was given it; '
  ''''' when it was not given: one namespace for every sender.';

CREATE FUNCTION record_received(consumer text, message_id text, sender text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  PERFORM require_text('consumer', record_received.consumer, 128, true);
  PERFORM require_text('message_id', record_received.message_id, 128, true);
  PERFORM require_text('sender', record_received.sender, 128, true);
  INSERT INTO received_messages (consumer, message_id, sender)
  VALUES (record_received.consumer, record_received.message_id, record_received.sender)
  ON CONFLICT ON CONSTRAINT received_messages_pkey DO NOTHING;
  RETURN FOUND;
END
$$;

COMMENT ON FUNCTION record_received(text, text, text) IS
  'Records that consumer handled inbound message_id sent by writer sender (the message''s outboxd_writer '
  'property) and returns true; returns false if it was recorded before (a duplicate delivery: change nothing, '
  'emit nothing). Two writers'' messages with the same id are two messages. Call it first in the handler''s '
  'transaction; a concurrent duplicate waits for the first transaction and then returns false (or true, if '
  'the first rolled back).';

COMMENT ON FUNCTION record_received(text, text) IS
  'record_received(consumer, message_id, sender) with sender '''': every sender''s ids in one namespace, so '
  'one writer''s message can make another''s with the same id a duplicate. Only for a consumer whose '
  'destinations one writer alone may reach; otherwise pass the outboxd_writer property as sender.';

-- ---------------------------------------------------------------------------
-- Operators name the writer when an id is used by several
-- ---------------------------------------------------------------------------

-- Among the rows an action would change (row_ids): a message id or the
-- session that names rows of more than one writer is refused unless the
-- writer was named; rows of no writer (before 009) count as a writer of their own.
CREATE FUNCTION require_one_writer(row_ids bigint[], message_ids text[], session_id text, writer text)
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  shared text;
  writers text;
BEGIN
  IF require_one_writer.writer IS NOT NULL OR cardinality(row_ids) < 2 THEN
    RETURN;
  END IF;
  SELECT n.name, string_agg(DISTINCT coalesce(n.writer, '(none)'), ', ') INTO shared, writers
    FROM (SELECT format('message id %s', to_jsonb(m.message_id)) AS name, m.writer FROM messages m
           WHERE m.id = ANY (row_ids) AND m.message_id = ANY (require_one_writer.message_ids)
          UNION ALL
          SELECT format('session %s', to_jsonb(m.session_id)), m.writer FROM messages m
           WHERE m.id = ANY (row_ids) AND m.session_id = require_one_writer.session_id) n
   GROUP BY n.name
  HAVING count(DISTINCT coalesce(n.writer, '')) > 1
   ORDER BY n.name LIMIT 1;
  IF shared IS NOT NULL THEN
    RAISE EXCEPTION '% names rows of more than one writer', shared
      USING ERRCODE = 'cardinality_violation', DETAIL = format('writers: %s', writers),
            HINT = 'Name the writer (outboxd ... --writer ROLE).';
  END IF;
END
$$;

COMMENT ON FUNCTION require_one_writer(bigint[], text[], text, text) IS
  'Internal: raises 21000 when writer is NULL and a message id or the session names rows of more than '
  'one writer among row_ids.';

DROP FUNCTION requeue_parked(text[], text, boolean, text);
DROP FUNCTION skip_parked(text[], text, boolean, text);
DROP FUNCTION change_parked(text, text[], text, boolean, text);
DROP FUNCTION lock_parked(text[], text, boolean);

-- Parked rows named by id, of a session, or all of them, of one writer when
-- named; locked in id order, so that two operators acting at once wait for
-- each other instead of deadlocking.
CREATE FUNCTION lock_parked(message_ids text[], session_id text, all_parked boolean, writer text)
RETURNS bigint[]
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  ids bigint[];
BEGIN
  SELECT coalesce(array_agg(t.id ORDER BY t.id), '{}') INTO ids FROM (
    SELECT m.id FROM messages m
     WHERE m.status = 'parked'
       AND (lock_parked.writer IS NULL OR coalesce(m.writer, '') = lock_parked.writer)
       AND (m.message_id = ANY (lock_parked.message_ids) OR m.session_id = lock_parked.session_id
            OR coalesce(lock_parked.all_parked, false))
     ORDER BY m.id FOR UPDATE) t;
  IF NOT coalesce(lock_parked.all_parked, false) THEN
    PERFORM require_one_writer(ids, lock_parked.message_ids, lock_parked.session_id, lock_parked.writer);
  END IF;
  RETURN ids;
END
$$;

COMMENT ON FUNCTION lock_parked(text[], text, boolean, text) IS
  'Internal: locks and returns the ids of the parked rows named (of writer, when given).';

CREATE FUNCTION change_parked(action text, message_ids text[], session_id text, all_parked boolean,
                              os_user text, writer text)
RETURNS SETOF text
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  ids bigint[];
BEGIN
  PERFORM name_os_user(os_user);
  ids := lock_parked(message_ids, session_id, all_parked, writer);
  IF action = 'requeued' THEN
    RETURN QUERY
      UPDATE messages m SET status = 'pending', attempts = 0, next_attempt_at = NULL,
                            first_failed_at = NULL, last_failed_at = NULL
       WHERE m.id = ANY (ids) RETURNING m.message_id;
  ELSE
    RETURN QUERY
      UPDATE messages m SET status = 'cancelled', cancelled_at = now(),
                            last_error = 'skipped by operator' || coalesce('; last error: ' || m.last_error, '')
       WHERE m.id = ANY (ids) RETURNING m.message_id;
  END IF;
  PERFORM name_os_user(NULL);
  IF cardinality(ids) > 0 THEN
    PERFORM wake_dispatchers();
  END IF;
END
$$;

COMMENT ON FUNCTION change_parked(text, text[], text, boolean, text, text) IS
  'Internal: the body of requeue_parked() (action requeued) and skip_parked() (action skipped).';

CREATE FUNCTION requeue_parked(message_ids text[], session_id text DEFAULT NULL, all_parked boolean DEFAULT false,
                               os_user text DEFAULT NULL, writer text DEFAULT NULL)
RETURNS SETOF text
LANGUAGE sql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
  SELECT change_parked('requeued', message_ids, session_id, all_parked, os_user, writer)
$$;

COMMENT ON FUNCTION requeue_parked(text[], text, boolean, text, text) IS
  'outboxd requeue: the parked rows with these message ids, of session_id, or all of them (all_parked), '
  'of writer when given, become pending with attempts 0, so their sessions move on; each gets a requeued '
  'event with the login role and os_user. A message id or session naming parked rows of more than one '
  'writer is refused (21000) unless writer is given. Returns the message ids requeued.';

CREATE FUNCTION skip_parked(message_ids text[], session_id text DEFAULT NULL, all_parked boolean DEFAULT false,
                            os_user text DEFAULT NULL, writer text DEFAULT NULL)
RETURNS SETOF text
LANGUAGE sql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
  SELECT change_parked('skipped', message_ids, session_id, all_parked, os_user, writer)
$$;

COMMENT ON FUNCTION skip_parked(text[], text, boolean, text, text) IS
  'outboxd skip: the parked rows named as for requeue_parked() are given up (cancelled, never published, '
  'last_error says skipped by operator), so their sessions move on; each gets a skipped event. '
  'Returns the message ids skipped.';

DROP FUNCTION replay(text[], text, text, timestamptz, timestamptz, int, boolean, text);
DROP FUNCTION replay_targets(text[], text, text, timestamptz, timestamptz, int);

-- The dispatched rows a replay names, in id order, at most max_rows of them
-- (matched counts them all).
CREATE FUNCTION replay_targets(message_ids text[], session_id text, destination text,
                               since timestamptz, until timestamptz, max_rows int, writer text)
RETURNS TABLE (row_id bigint, matched bigint)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  IF message_ids IS NULL AND session_id IS NULL AND destination IS NULL THEN
    RAISE EXCEPTION 'replay needs message ids, a session or a destination'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF max_rows IS NULL OR max_rows < 1 THEN
    RAISE EXCEPTION 'max_rows must be at least 1' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN QUERY
    SELECT m.id, count(*) OVER () FROM messages m
     WHERE m.status = 'dispatched'
       AND (replay_targets.writer IS NULL OR coalesce(m.writer, '') = replay_targets.writer)
       AND (replay_targets.message_ids IS NULL OR m.message_id = ANY (replay_targets.message_ids))
       AND (replay_targets.session_id IS NULL OR m.session_id = replay_targets.session_id)
       AND (replay_targets.destination IS NULL OR m.destination = replay_targets.destination)
       AND (replay_targets.since IS NULL OR m.dispatched_at >= replay_targets.since)
       AND (replay_targets.until IS NULL OR m.dispatched_at < replay_targets.until)
     ORDER BY m.id LIMIT max_rows;
END
$$;

COMMENT ON FUNCTION replay_targets(text[], text, text, timestamptz, timestamptz, int, text) IS
  'Internal: the dispatched rows replay() names (of writer, when given), in id order, with how many match in all.';

CREATE FUNCTION replay(message_ids text[], session_id text, destination text, since timestamptz,
                       until timestamptz, max_rows int, dry_run boolean, os_user text DEFAULT NULL,
                       writer text DEFAULT NULL)
RETURNS TABLE (message_id text, row_session text, matched bigint, waiting_behind bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  ids bigint[];
  total bigint;
BEGIN
  -- NULL would be neither a dry run nor a checked one: it skipped the limit and the lock.
  IF dry_run IS NULL THEN
    RAISE EXCEPTION 'replay needs dry_run true or false, not NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  PERFORM require_text('os_user', os_user, 128);
  SELECT coalesce(array_agg(t.row_id ORDER BY t.row_id), '{}'), coalesce(max(t.matched), 0)
    INTO ids, total
    FROM replay_targets(message_ids, session_id, destination, since, until, max_rows, writer) t;
  PERFORM require_one_writer(ids, message_ids, session_id, writer);
  IF NOT dry_run AND total > max_rows THEN
    RAISE EXCEPTION 'replay would touch % rows, more than the limit of %', total, max_rows
      USING ERRCODE = 'program_limit_exceeded', HINT = 'Narrow the selection or raise the limit.';
  END IF;
  IF NOT dry_run THEN
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}') INTO ids FROM (
      SELECT m.id FROM messages m WHERE m.id = ANY (ids) AND m.status = 'dispatched' ORDER BY m.id FOR UPDATE) l;
  END IF;
  -- waiting_behind: pending rows of the session after this one, which the replay puts behind it;
  -- of its writer's session only, as the claim holds rows back.
  RETURN QUERY
    SELECT m.message_id, m.session_id, total,
           (SELECT count(*) FROM messages p WHERE p.session_id = m.session_id AND p.id > m.id
              AND p.writer IS NOT DISTINCT FROM m.writer AND p.status = 'pending')
      FROM messages m WHERE m.id = ANY (ids) AND m.status = 'dispatched' ORDER BY m.id;
  IF dry_run OR cardinality(ids) = 0 THEN
    RETURN;
  END IF;
  -- Due now and later than created: a scheduled row, which the claim takes
  -- in its session's id order and which holds back the session's later rows
  -- until it is accepted, as a timeout that falls due does. The partition is
  -- derived again: set_partition_count() re-hashes only pending and parked rows.
  PERFORM name_os_user(os_user);
  UPDATE messages m
     SET status = 'pending', dispatched_at = NULL, attempts = 0, next_attempt_at = NULL, last_error = NULL,
         first_failed_at = NULL, last_failed_at = NULL,
         due_at = greatest(now(), m.created_at + interval '1 microsecond'),
         partition = (hashtext(coalesce(m.session_id, m.message_id))::bigint & 2147483647)
                     % (SELECT st.partition_count FROM settings st)
   WHERE m.id = ANY (ids);
  PERFORM name_os_user(NULL);
  PERFORM wake_dispatchers();
END
$$;

COMMENT ON FUNCTION replay(text[], text, text, timestamptz, timestamptz, int, boolean, text, text) IS
  'outboxd replay: dispatched rows (retention keep) named by message ids, session and/or destination, '
  'dispatched in [since, until), of writer when given, become pending again with the same id and message_id, '
  'due now as scheduled rows: they go out in id order within their session, ahead of its later pending rows '
  'not yet claimed. Returns the rows in id order with how many match and how many pending rows of the session '
  'by the same writer follow each. dry_run (true or false, never NULL) changes nothing; otherwise more than '
  'max_rows matching rows is an error (54000) and each row gets a replayed event. A message id or session '
  'naming rows of more than one writer is refused (21000) unless writer is given.';

DROP FUNCTION fire_scheduled(text, text, text);

-- The row a scheduled claim holds is due already: the lock waits for the
-- claim, and a row it dispatched meanwhile no longer matches.
CREATE FUNCTION fire_scheduled(message_id text, session_id text, os_user text DEFAULT NULL, writer text DEFAULT NULL)
RETURNS SETOF text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  ids bigint[];
BEGIN
  PERFORM require_text('os_user', fire_scheduled.os_user, 128);
  SELECT coalesce(array_agg(t.id ORDER BY t.id), '{}') INTO ids FROM (
    SELECT m.id FROM messages m
     WHERE m.status = 'pending' AND m.due_at > now()
       AND (fire_scheduled.writer IS NULL OR coalesce(m.writer, '') = fire_scheduled.writer)
       AND (m.message_id = fire_scheduled.message_id OR m.session_id = fire_scheduled.session_id)
     ORDER BY m.id FOR UPDATE) t;
  PERFORM require_one_writer(ids, ARRAY[fire_scheduled.message_id], fire_scheduled.session_id, fire_scheduled.writer);
  RETURN QUERY
    WITH fired AS (
      UPDATE messages m SET due_at = now() FROM messages d
       WHERE m.id = ANY (ids) AND d.id = m.id
      RETURNING m.id, m.message_id, d.due_at AS was_due),
    recorded AS (
      INSERT INTO row_events (row_id, message_id, action, os_user, detail)
      SELECT f.id, f.message_id, 'fired', fire_scheduled.os_user, format('was due at %s', f.was_due)
        FROM fired f ORDER BY f.id)
    SELECT f.message_id FROM fired f ORDER BY f.id;
END
$$;

COMMENT ON FUNCTION fire_scheduled(text, text, text, text) IS
  'outboxd fire: the scheduled pending rows (due_at in the future) with this message_id or of this session, '
  'of writer when given, become due now; each gets a fired event with the login role and os_user. A message '
  'id or session naming rows of more than one writer is refused (21000) unless writer is given. Returns their '
  'message ids.';

-- ---------------------------------------------------------------------------
-- Privileges
-- ---------------------------------------------------------------------------

DO $$
DECLARE
  s text := current_schema();
  dispatcher text := s || '_dispatcher';
  writer_role text := s || '_writer';
BEGIN
  EXECUTE format('REVOKE ALL ON FUNCTION %1$I.require_one_writer(bigint[], text[], text, text), '
                 '%1$I.lock_parked(text[], text, boolean, text), '
                 '%1$I.change_parked(text, text[], text, boolean, text, text), '
                 '%1$I.requeue_parked(text[], text, boolean, text, text), '
                 '%1$I.skip_parked(text[], text, boolean, text, text), '
                 '%1$I.replay_targets(text[], text, text, timestamptz, timestamptz, int, text), '
                 '%1$I.replay(text[], text, text, timestamptz, timestamptz, int, boolean, text, text), '
                 '%1$I.fire_scheduled(text, text, text, text), '
                 '%1$I.record_received(text, text, text) FROM PUBLIC', s);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.requeue_parked(text[], text, boolean, text, text), '
                 '%1$I.skip_parked(text[], text, boolean, text, text), '
                 '%1$I.replay(text[], text, text, timestamptz, timestamptz, int, boolean, text, text), '
                 '%1$I.fire_scheduled(text, text, text, text) TO %2$I', s, dispatcher);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %I.record_received(text, text, text) TO %I', s, writer_role);
  EXECUTE format('GRANT INSERT (sender), UPDATE (sender) ON %I.received_messages TO %I', s, writer_role);
END
$$;

-- ---------------------------------------------------------------------------
-- A workflow's processed ids key by sender too
-- ---------------------------------------------------------------------------

DO $$
DECLARE
  s text := current_schema();
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  IF to_regclass(format('%I.processed_messages', w)) IS NULL THEN
    RAISE EXCEPTION 'table "%".processed_messages not found: apply 001_outbox.sql to 028 with the same '
                    'outboxd.workflow_schema first', w USING ERRCODE = 'undefined_table';
  END IF;
  -- The workflow schema first, as for 002's functions.
  PERFORM set_config('search_path', format('%I, %I, pg_catalog, pg_temp', w, s), false);
END
$$;

ALTER TABLE processed_messages
  ADD COLUMN sender text NOT NULL DEFAULT '',
  ADD CONSTRAINT processed_messages_sender_valid CHECK (length(sender) <= 128 AND sender !~ '[[:cntrl:]]'),
  DROP CONSTRAINT processed_messages_pkey,
  ADD CONSTRAINT processed_messages_pkey PRIMARY KEY (workflow_id, writer, message_id, sender);

COMMENT ON COLUMN processed_messages.sender IS
  'The writer that sent the message (its outboxd_writer property), as record_processed() was given it; '
  ''''' when it was not given: one namespace for every sender.';

CREATE FUNCTION record_processed(workflow_id text, message_id text, sender text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  PERFORM require_text('message_id', record_processed.message_id, 128, true);
  PERFORM require_text('sender', record_processed.sender, 128, true);
  PERFORM 1 FROM instances i WHERE i.id = record_processed.workflow_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'workflow "%" does not exist', record_processed.workflow_id
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  INSERT INTO processed_messages (workflow_id, message_id, sender)
  VALUES (record_processed.workflow_id, record_processed.message_id, record_processed.sender)
  ON CONFLICT ON CONSTRAINT processed_messages_pkey DO NOTHING;
  RETURN FOUND;
END
$$;

COMMENT ON FUNCTION record_processed(text, text, text) IS
  'Records that the workflow handled inbound message_id sent by writer sender (the message''s outboxd_writer '
  'property) and returns true; returns false if it was recorded before (a duplicate delivery: emit nothing). '
  'Two writers'' messages with the same id are two messages. Call it first in the transition; a concurrent '
  'duplicate waits for the first transaction and then returns false.';

COMMENT ON FUNCTION record_processed(text, text) IS
  'record_processed(workflow_id, message_id, sender) with sender '''': every sender''s ids in one namespace. '
  'Only for a workflow whose messages one writer alone may send; otherwise pass the outboxd_writer property.';

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := current_schema();
BEGIN
  EXECUTE format('REVOKE ALL ON FUNCTION %I.record_processed(text, text, text) FROM PUBLIC', w);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %I.record_processed(text, text, text) TO %I', w, s || '_writer');
  EXECUTE format('GRANT INSERT (sender), UPDATE (sender) ON %I.processed_messages TO %I', w, s || '_writer');
END
$$;
