-- 001_outbox: the outbox table with its partition and wake-up triggers, enqueue(), cancel(), settings, leases and instances.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1). The schema
-- name comes from the custom setting outboxd.schema (default outbox) and the
-- partition count from outboxd.partitions (default 64), for example
--   PGOPTIONS='-c outboxd.schema=billing -c outboxd.partitions=16' \
--     psql -1 -v ON_ERROR_STOP=1 -f sql/001_outbox.sql
-- After the first statement every name is unqualified; each function keeps the
-- search_path of this script (SET search_path FROM CURRENT), so it works
-- whatever search_path its caller has.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  partitions text := coalesce(nullif(current_setting('outboxd.partitions', true), ''), '64');
BEGIN
  -- Derived names (<schema>_wakeup, <schema>_dispatcher) must fit in 63 bytes.
  IF octet_length(s) > 52 OR s ~ '[[:cntrl:]]' THEN
    RAISE EXCEPTION 'outboxd.schema must be 1..52 bytes without control characters'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF partitions !~ '^\s*[0-9]{1,4}\s*$' OR partitions::int NOT BETWEEN 1 AND 4096 THEN
    RAISE EXCEPTION 'outboxd.partitions must be an integer 1..4096, not "%"', partitions
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- outboxd migrate creates the schema beforehand; CREATE SCHEMA IF NOT EXISTS
  -- would still need the CREATE privilege on the database.
  IF NOT EXISTS (SELECT 1 FROM pg_namespace n WHERE n.nspname = s) THEN
    EXECUTE format('CREATE SCHEMA %I', s);
  END IF;
  EXECUTE format('COMMENT ON SCHEMA %I IS %L', s,
    'Transactional outbox: rows written by applications, published by outboxd.');
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

-- ---------------------------------------------------------------------------
-- Validation helpers
-- ---------------------------------------------------------------------------

-- A SQL-standard body is bound when it is created, so it needs no pinned
-- search_path; without SET it can be inlined into the caller's plan, which
-- makes the common, valid case cost nothing.
CREATE FUNCTION text_ok(value text, max_length int)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN value ~ '^[^[:cntrl:]]+$' AND length(value) <= max_length;

COMMENT ON FUNCTION text_ok(text, int) IS
  'True if value is 1..max_length characters without control characters; NULL for NULL. '
  'The same rule as the CHECK constraints of messages.';

CREATE FUNCTION require_text(field text, value text, max_length int, required boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  IF value IS NULL THEN
    IF required THEN
      RAISE EXCEPTION '% is required', field USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN;
  END IF;
  IF NOT text_ok(value, max_length) THEN
    RAISE EXCEPTION '% must be 1..% characters without control characters', field, max_length
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = CASE
              WHEN value ~ '[[:cntrl:]]' THEN format('control character at position %s',
                length(substring(value FROM '^[^[:cntrl:]]*')) + 1)
              ELSE format('got %s characters', length(value))
            END;
  END IF;
END
$$;

COMMENT ON FUNCTION require_text(text, text, int, boolean) IS
  'Raises SQLSTATE 22023 naming the field unless value is NULL (allowed unless required) '
  'or 1..max_length characters without control characters. Used by enqueue() and the '
  'workflow functions so that callers see the field name before a CHECK constraint fires.';

-- ---------------------------------------------------------------------------
-- Tables
-- ---------------------------------------------------------------------------

CREATE TABLE settings (
  one_row         boolean PRIMARY KEY DEFAULT true CONSTRAINT settings_one_row CHECK (one_row),
  partition_count int NOT NULL CONSTRAINT settings_partition_count_range CHECK (partition_count BETWEEN 1 AND 4096)
);

COMMENT ON TABLE settings IS
  'Single row of installation settings. partition_count is also compiled into '
  'messages_set_partition(); change it only with set_partition_count().';

CREATE TABLE messages (
  id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  message_id             text NOT NULL,
  destination            text NOT NULL,
  session_id             text,
  correlation_id         text,
  parent_message_id      text,
  originating_message_id text,
  subject                text,
  content_type           text,
  headers                jsonb NOT NULL DEFAULT '{}',
  body                   bytea NOT NULL DEFAULT '',
  ttl                    interval,
  traceparent            text,
  created_at             timestamptz NOT NULL DEFAULT now(),
  due_at                 timestamptz NOT NULL DEFAULT now(),
  status                 text NOT NULL DEFAULT 'pending',
  attempts               int NOT NULL DEFAULT 0,
  next_attempt_at        timestamptz,
  last_error             text,
  dispatched_at          timestamptz,
  cancelled_at           timestamptz,
  partition              int NOT NULL DEFAULT 0,

  -- CHECK expressions are re-read from the catalog on every INSERT and UPDATE
  -- statement, so they are kept small: x ~ '^[^[:cntrl:]]+$' AND length(x) <= n
  -- is "1..n characters without control characters" in the fewest nodes.
  CONSTRAINT messages_message_id_key UNIQUE (message_id),
  CONSTRAINT messages_message_id_valid
    CHECK (message_id ~ '^[^[:cntrl:]]+$' AND length(message_id) <= 128),
  CONSTRAINT messages_destination_valid
    CHECK (destination ~ '^[^[:cntrl:]]+$' AND length(destination) <= 256),
  CONSTRAINT messages_session_id_valid
    CHECK (session_id ~ '^[^[:cntrl:]]+$' AND length(session_id) <= 128),
  CONSTRAINT messages_correlation_id_valid
    CHECK (correlation_id ~ '^[^[:cntrl:]]+$' AND length(correlation_id) <= 128),
  CONSTRAINT messages_parent_message_id_valid
    CHECK (parent_message_id ~ '^[^[:cntrl:]]+$' AND length(parent_message_id) <= 128),
  CONSTRAINT messages_originating_message_id_valid
    CHECK (originating_message_id ~ '^[^[:cntrl:]]+$' AND length(originating_message_id) <= 128),
  CONSTRAINT messages_subject_valid
    CHECK (subject ~ '^[^[:cntrl:]]+$' AND length(subject) <= 256),
  CONSTRAINT messages_content_type_valid
    CHECK (content_type ~ '^[^[:cntrl:]]+$' AND length(content_type) <= 256),
  -- W3C trace context: version-traceid-parentid-flags in lowercase hex; later
  -- versions may append fields, hence the optional tail and the 256 bound.
  CONSTRAINT messages_traceparent_valid
    CHECK (traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[^[:cntrl:]]*)?$'
           AND length(traceparent) <= 256),
  -- AMQP application-properties carry simple values only.
  CONSTRAINT messages_headers_valid
    CHECK (jsonb_typeof(headers) = 'object'
           AND NOT jsonb_path_exists(headers, '$.* ? (@.type() == "object" || @.type() == "array")')),
  -- AMQP header.ttl is a uint in milliseconds.
  CONSTRAINT messages_ttl_valid
    CHECK (ttl BETWEEN interval '1 millisecond' AND interval '4294967.295 seconds'),
  CONSTRAINT messages_due_at_finite CHECK (isfinite(due_at)),
  CONSTRAINT messages_status_valid
    CHECK (status IN ('pending', 'dispatched', 'parked', 'cancelled')),
  CONSTRAINT messages_attempts_valid CHECK (attempts >= 0),
  CONSTRAINT messages_partition_valid CHECK (partition >= 0),
  -- Retention purges finished rows by these timestamps (messages_finished_idx);
  -- a finished row without one would never be purged.
  CONSTRAINT messages_dispatched_at_set CHECK (status <> 'dispatched' OR dispatched_at IS NOT NULL),
  CONSTRAINT messages_cancelled_at_set CHECK (status <> 'cancelled' OR cancelled_at IS NOT NULL)
);

COMMENT ON TABLE messages IS
  'The outbox. Applications insert rows (enqueue() or plain INSERT) in the transaction '
  'that changes their state; outboxd publishes each due pending row as an AMQP 1.0 message '
  'and marks it dispatched once the broker accepted it. A row is immediate when '
  'due_at <= created_at, scheduled otherwise.';
COMMENT ON COLUMN messages.id IS 'Insertion order; per-session publish order follows it.';
COMMENT ON COLUMN messages.message_id IS 'Deterministic id chosen by the application; AMQP message-id. Unique.';
COMMENT ON COLUMN messages.destination IS 'Logical destination mapped to an address by the broker profile, or a full address.';
COMMENT ON COLUMN messages.session_id IS 'Ordering key (AMQP group-id); rows of a session are published in id order.';
COMMENT ON COLUMN messages.headers IS 'AMQP application-properties: a JSON object of strings, numbers, booleans or nulls.';
COMMENT ON COLUMN messages.body IS 'Published as one AMQP data section, bytes as written.';
COMMENT ON COLUMN messages.ttl IS 'AMQP header.ttl, 1 ms .. 4294967295 ms.';
COMMENT ON COLUMN messages.traceparent IS 'W3C trace context header, sent as an application property.';
COMMENT ON COLUMN messages.due_at IS 'Not published before this time (database clock). Later than created_at: a scheduled message.';
COMMENT ON COLUMN messages.status IS 'pending, dispatched (broker accepted), parked (gave up after max_attempts), cancelled.';
COMMENT ON COLUMN messages.next_attempt_at IS 'Set while a rejected row backs off; its session waits behind it.';
COMMENT ON COLUMN messages.partition IS 'Lease partition, derived on insert from hashtext(coalesce(session_id, message_id)).';

CREATE INDEX messages_ready_idx ON messages (id)
  WHERE status = 'pending' AND due_at <= created_at;
CREATE INDEX messages_scheduled_idx ON messages (due_at, id)
  WHERE status = 'pending' AND due_at > created_at;
CREATE INDEX messages_blocked_idx ON messages (session_id, id)
  WHERE status = 'parked' OR (status = 'pending' AND next_attempt_at IS NOT NULL);
CREATE INDEX messages_finished_idx ON messages ((coalesce(dispatched_at, cancelled_at)))
  WHERE status IN ('dispatched', 'cancelled');

CREATE TABLE leases (
  partition   int PRIMARY KEY CONSTRAINT leases_partition_valid CHECK (partition >= 0),
  owner       text,
  epoch       bigint NOT NULL DEFAULT 0,
  acquired_at timestamptz,
  renewed_at  timestamptz,
  expires_at  timestamptz
);

COMMENT ON TABLE leases IS
  'One row per partition: which outboxd instance may publish its rows, until expires_at. '
  'epoch grows with every change of owner so that a stale holder can be fenced off.';

CREATE TABLE instances (
  instance_id  text PRIMARY KEY,
  started_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  idle         boolean NOT NULL DEFAULT false
);

COMMENT ON TABLE instances IS
  'Running outboxd instances and their heartbeats. An instance sets idle before it sleeps; '
  'inserts notify <schema>_wakeup only while some instance is idle.';

-- ---------------------------------------------------------------------------
-- Partitions
-- ---------------------------------------------------------------------------

CREATE FUNCTION write_partition_function(n int)
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
  IF n IS NULL OR n NOT BETWEEN 1 AND 4096 THEN
    RAISE EXCEPTION 'partition count must be 1..4096' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Runs for every inserted row, so it is as cheap as it gets: the count is a
  -- literal (no table lookup), and instead of SET search_path (a GUC save and
  -- restore per call, about as costly as the body) every name in the body is
  -- qualified, which makes it independent of the caller's search_path too.
  EXECUTE format($def$
CREATE OR REPLACE FUNCTION %1$I.messages_set_partition()
RETURNS trigger
LANGUAGE plpgsql
AS $body$
BEGIN
  NEW.partition := (pg_catalog.hashtext(coalesce(NEW.session_id, NEW.message_id))::pg_catalog.int8
                    OPERATOR(pg_catalog.&) 2147483647) OPERATOR(pg_catalog.%%) %2$s;
  RETURN NEW;
END
$body$
$def$, current_schema(), n);
  EXECUTE format('COMMENT ON FUNCTION %I.messages_set_partition() IS %L', current_schema(),
    format('BEFORE INSERT row trigger of messages: partition = '
           '(hashtext(coalesce(session_id, message_id)) & 2147483647) %% %s. '
           'Generated by write_partition_function(); do not edit. Its body names '
           'only qualified objects instead of pinning search_path.', n));
END
$fn$;

COMMENT ON FUNCTION write_partition_function(int) IS
  'Internal: (re)creates messages_set_partition() with the partition count n compiled in. '
  'Call set_partition_count() instead.';

CREATE FUNCTION set_partition_count(n int)
RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  moved bigint;
  next_epoch bigint;
BEGIN
  IF n IS NULL OR n NOT BETWEEN 1 AND 4096 THEN
    RAISE EXCEPTION 'partition count must be 1..4096' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Writers wait until this commits, so no row is hashed with the old count afterwards.
  LOCK TABLE settings, leases IN ACCESS EXCLUSIVE MODE;
  LOCK TABLE messages IN SHARE ROW EXCLUSIVE MODE;
  PERFORM write_partition_function(n);
  UPDATE messages m
     SET partition = (hashtext(coalesce(m.session_id, m.message_id))::bigint & 2147483647) % n
   WHERE m.status IN ('pending', 'parked')
     AND m.partition <> (hashtext(coalesce(m.session_id, m.message_id))::bigint & 2147483647) % n;
  GET DIAGNOSTICS moved = ROW_COUNT;
  -- New leases start above every old epoch, which fences off any holder that missed the memo.
  SELECT coalesce(max(l.epoch), 0) + 1 INTO next_epoch FROM leases l;
  DELETE FROM leases;
  INSERT INTO leases (partition, epoch) SELECT p, next_epoch FROM generate_series(0, n - 1) AS p;
  UPDATE settings SET partition_count = n;
  RETURN moved;
END
$$;

COMMENT ON FUNCTION set_partition_count(int) IS
  'Changes the number of lease partitions to n (1..4096): rewrites messages_set_partition(), '
  're-hashes pending and parked rows, resets leases (all released, epochs raised) and returns '
  'the number of re-hashed rows. Stop all dispatchers first. Also run it with the current '
  'count after a major PostgreSQL upgrade, should hashtext() ever change.';

DO $$
DECLARE
  n int := coalesce(nullif(current_setting('outboxd.partitions', true), ''), '64')::int;  -- checked above
BEGIN
  INSERT INTO settings (partition_count) VALUES (n);
  INSERT INTO leases (partition) SELECT generate_series(0, n - 1);
  PERFORM write_partition_function(n);
END
$$;

CREATE TRIGGER messages_set_partition
  BEFORE INSERT ON messages
  FOR EACH ROW EXECUTE FUNCTION messages_set_partition();

-- ---------------------------------------------------------------------------
-- Wake-up
-- ---------------------------------------------------------------------------

CREATE FUNCTION notify_wakeup()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
  -- NOTIFY serialises commits, so pay for it only when a dispatcher sleeps.
  IF EXISTS (SELECT 1 FROM instances i WHERE i.idle) THEN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '_wakeup', '');
  END IF;
  RETURN NULL;
END
$$;

COMMENT ON FUNCTION notify_wakeup() IS
  'AFTER trigger of messages: NOTIFY <schema>_wakeup (empty payload) if some instance is idle. '
  'Security definer because writers may not read instances.';

CREATE TRIGGER messages_wakeup_insert
  AFTER INSERT ON messages
  FOR EACH STATEMENT EXECUTE FUNCTION notify_wakeup();

-- Row level with a WHEN clause: the dispatcher's own batch updates (marking,
-- backing off) never call the function; only a requeue to pending does.
CREATE TRIGGER messages_wakeup_requeue
  AFTER UPDATE OF status ON messages
  FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM 'pending' AND NEW.status = 'pending')
  EXECUTE FUNCTION notify_wakeup();

-- ---------------------------------------------------------------------------
-- enqueue / cancel
-- ---------------------------------------------------------------------------

CREATE FUNCTION enqueue(
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
  differs   text[];
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
  IF jsonb_typeof(v_headers) <> 'object'
     OR jsonb_path_exists(v_headers, '$.* ? (@.type() == "object" || @.type() == "array")') THEN
    RAISE EXCEPTION 'headers must be a JSON object whose values are strings, numbers, booleans or null'
      USING ERRCODE = 'invalid_parameter_value';
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
      differs := array_remove(ARRAY[
        CASE WHEN old.destination IS DISTINCT FROM enqueue.destination THEN 'destination' END,
        CASE WHEN old.body IS DISTINCT FROM v_body THEN 'body' END,
        CASE WHEN old.session_id IS DISTINCT FROM enqueue.session_id THEN 'session_id' END,
        CASE WHEN old.correlation_id IS DISTINCT FROM enqueue.correlation_id THEN 'correlation_id' END,
        CASE WHEN old.parent_message_id IS DISTINCT FROM enqueue.parent_message_id THEN 'parent_message_id' END,
        CASE WHEN old.originating_message_id IS DISTINCT FROM enqueue.originating_message_id THEN 'originating_message_id' END,
        CASE WHEN old.subject IS DISTINCT FROM enqueue.subject THEN 'subject' END,
        CASE WHEN old.content_type IS DISTINCT FROM enqueue.content_type THEN 'content_type' END,
        CASE WHEN old.headers IS DISTINCT FROM v_headers THEN 'headers' END,
        CASE WHEN old.ttl IS DISTINCT FROM enqueue.ttl THEN 'ttl' END,
        CASE WHEN old.traceparent IS DISTINCT FROM enqueue.traceparent THEN 'traceparent' END,
        -- A default due_at means "now", which differs on every call: compare only a given one.
        CASE WHEN enqueue.due_at IS NOT NULL AND old.due_at IS DISTINCT FROM enqueue.due_at THEN 'due_at' END
      ], NULL);
      IF cardinality(differs) > 0 THEN
        RAISE EXCEPTION 'message_id "%" already exists with different content', enqueue.message_id
          USING ERRCODE = 'unique_violation',
                DETAIL = 'differs in: ' || array_to_string(differs, ', '),
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
  'due_at NULL means now (immediate); a later due_at schedules it. Idempotent on message_id: '
  'the same content again returns the existing id and inserts nothing; different content '
  '(due_at compared only when given) raises SQLSTATE 23505. Invalid fields raise SQLSTATE '
  '22023 naming the field. Idempotency lasts as long as the row is kept (retention).';

CREATE FUNCTION enqueue(
  destination            text,
  message_id             text,
  body                   jsonb,
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
BEGIN
  -- plpgsql, not sql: its plan is cached for the session instead of built per call.
  RETURN enqueue(
      destination => enqueue.destination,
      message_id => enqueue.message_id,
      body => convert_to(enqueue.body::text, 'UTF8'),
      session_id => enqueue.session_id,
      correlation_id => enqueue.correlation_id,
      parent_message_id => enqueue.parent_message_id,
      originating_message_id => enqueue.originating_message_id,
      subject => enqueue.subject,
      content_type => coalesce(enqueue.content_type, 'application/json'),
      headers => enqueue.headers,
      ttl => enqueue.ttl,
      traceparent => enqueue.traceparent,
      due_at => enqueue.due_at);
END
$$;

COMMENT ON FUNCTION enqueue(text, text, jsonb, text, text, text, text, text, text, jsonb, interval, text, timestamptz) IS
  'enqueue() with a jsonb body, stored as its UTF-8 text; content_type defaults to application/json.';

CREATE FUNCTION enqueue(
  destination            text,
  message_id             text,
  body                   text,
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
BEGIN
  -- plpgsql, not sql: its plan is cached for the session instead of built per call.
  RETURN enqueue(
      destination => enqueue.destination,
      message_id => enqueue.message_id,
      body => convert_to(enqueue.body, 'UTF8'),
      session_id => enqueue.session_id,
      correlation_id => enqueue.correlation_id,
      parent_message_id => enqueue.parent_message_id,
      originating_message_id => enqueue.originating_message_id,
      subject => enqueue.subject,
      content_type => enqueue.content_type,
      headers => enqueue.headers,
      ttl => enqueue.ttl,
      traceparent => enqueue.traceparent,
      due_at => enqueue.due_at);
END
$$;

COMMENT ON FUNCTION enqueue(text, text, text, text, text, text, text, text, text, jsonb, interval, text, timestamptz) IS
  'enqueue() with a text body, stored as UTF-8 bytes. An untyped literal body picks this overload.';

CREATE FUNCTION cancel(message_id text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
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
  -- back from the claim until the caller commits.
  SELECT * INTO target FROM messages m WHERE m.message_id = cancel.message_id;
  IF NOT FOUND OR target.status <> 'pending' OR target.due_at <= clock_timestamp() THEN
    RETURN false;
  END IF;
  SELECT * INTO target FROM messages m WHERE m.id = target.id FOR UPDATE;
  IF NOT FOUND OR target.status <> 'pending' OR target.due_at <= clock_timestamp() THEN
    RETURN false;
  END IF;
  UPDATE messages m SET status = 'cancelled', cancelled_at = clock_timestamp() WHERE m.id = target.id;
  RETURN true;
END
$$;

COMMENT ON FUNCTION cancel(text) IS
  'Cancels a pending message whose due_at is still in the future and returns true; returns '
  'false if it is unknown, already dispatched, cancelled or parked, or already due (then it '
  'may be in flight and will be published). Cancel before due_at and let workflow state '
  'decide afterwards: the receiver of a late timeout checks state and ignores it.';

-- Nothing here is for PUBLIC; 003_roles.sql grants what each role needs.
DO $$
BEGIN
  EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA %I FROM PUBLIC', current_schema());
END
$$;
