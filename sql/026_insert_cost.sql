-- 026_insert_cost: an insert into messages calls one rule function with the row whole and one trigger.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 025, with the same outboxd.schema setting.
--
-- Why: every application transaction that writes a message pays for what an
-- insert into messages runs, and for a one-row statement PostgreSQL prepares
-- all of it again each time. The CHECK handed 17 columns to
-- messages_row_valid(), whose stored expression PostgreSQL read back and
-- prepared per statement, and whose 19 IFs PL/pgSQL prepared again in every
-- transaction; a second BEFORE INSERT trigger, messages_check_destination,
-- read settings once per row to learn that neither destination rule was set.
--
-- What changes:
--   - The CHECK messages_row_valid passes the row whole:
--     messages_row_valid(messages) names the first rule broken in one CASE
--     expression (the same rules, order and SQLSTATE 23514 as before); the
--     17-argument function is gone.
--   - messages_set_partition, which write_partition_function() generates,
--     also applies the destination rules: settings.destination_charset and
--     settings.allowed_destinations are written into its body as literals
--     when they are set, so while neither is set an insert looks at nothing.
--     A row that one of them may refuse goes to check_inserted_row(), which
--     reads settings as they are now.
--   - Every change of settings writes that trigger function again
--     (settings_write_insert_trigger, in the changing transaction), with the
--     wake-up check.
--   - The trigger messages_check_destination and its function are gone.
--
-- Cost: ALTER TABLE takes an ACCESS EXCLUSIVE lock on messages and reads it
-- once to check the existing rows against the new constraint: writers and
-- outboxd wait for that read (about a second per million rows).

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regprocedure(format('%I.refresh_statistics()', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 025: apply 001_outbox.sql to 025 first', s
      USING ERRCODE = 'undefined_function';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

ALTER TABLE messages DROP CONSTRAINT messages_row_valid;
DROP FUNCTION messages_row_valid(text, text, text, text, text, text, text, text, text, jsonb, interval,
                                 timestamptz, text, int, int, timestamptz, timestamptz);

-- One statement, one expression: PL/pgSQL prepares one expression per
-- transaction instead of one per rule. As in a CHECK, a rule that yields NULL
-- (a NULL column) holds: CASE takes no branch whose condition is NULL.
CREATE FUNCTION messages_row_valid(r messages)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path FROM CURRENT
AS $$
DECLARE
  broken text := CASE
    WHEN NOT text_ok(r.message_id, 128) THEN 'messages_message_id_valid'
    WHEN NOT text_ok(r.destination, 256) THEN 'messages_destination_valid'
    WHEN NOT text_ok(r.session_id, 128) THEN 'messages_session_id_valid'
    WHEN NOT text_ok(r.correlation_id, 128) THEN 'messages_correlation_id_valid'
    WHEN NOT text_ok(r.parent_message_id, 128) THEN 'messages_parent_message_id_valid'
    WHEN NOT text_ok(r.originating_message_id, 128) THEN 'messages_originating_message_id_valid'
    WHEN NOT text_ok(r.subject, 256) THEN 'messages_subject_valid'
    WHEN NOT text_ok(r.content_type, 256) THEN 'messages_content_type_valid'
    -- W3C trace context: version-traceid-parentid-flags in lowercase hex; later
    -- versions may append fields, hence the optional tail and the 256 bound.
    WHEN NOT (r.traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[^[:cntrl:]]*)?$'
              AND length(r.traceparent) <= 256) THEN 'messages_traceparent_valid'
    -- AMQP application-properties carry simple values only.
    WHEN r.headers <> '{}' AND NOT (jsonb_typeof(r.headers) = 'object'
         AND NOT jsonb_path_exists(r.headers, '$.* ? (@.type() == "object" || @.type() == "array")'))
      THEN 'messages_headers_valid'
    -- AMQP header.ttl is a uint in milliseconds.
    WHEN NOT (r.ttl BETWEEN interval '1 millisecond' AND interval '4294967.295 seconds') THEN 'messages_ttl_valid'
    WHEN NOT isfinite(r.due_at) THEN 'messages_due_at_finite'
    WHEN NOT (r.status IN ('pending', 'dispatched', 'parked', 'cancelled')) THEN 'messages_status_valid'
    WHEN NOT (r.attempts >= 0) THEN 'messages_attempts_valid'
    WHEN NOT (r.partition >= 0) THEN 'messages_partition_valid'
    -- Retention purges finished rows by these timestamps (messages_dispatched_idx,
    -- messages_cancelled_idx); a finished row without one would never be purged.
    WHEN NOT (r.status <> 'dispatched' OR r.dispatched_at IS NOT NULL) THEN 'messages_dispatched_at_set'
    WHEN NOT (r.status <> 'cancelled' OR r.cancelled_at IS NOT NULL) THEN 'messages_cancelled_at_set'
  END;
BEGIN
  IF broken IS NOT NULL THEN
    RAISE EXCEPTION 'new row for relation "messages" violates check constraint "%"', broken
      USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'messages', SCHEMA = current_schema();
  END IF;
  RETURN true;
END
$$;

COMMENT ON FUNCTION messages_row_valid(messages) IS
  'CHECK of messages (constraint messages_row_valid), given the row whole: true, or SQLSTATE 23514 naming the '
  'first rule broken (messages_<column>_valid, messages_due_at_finite, messages_dispatched_at_set, '
  'messages_cancelled_at_set).';

ALTER TABLE messages ADD CONSTRAINT messages_row_valid CHECK (messages_row_valid(messages));

REVOKE ALL ON FUNCTION messages_row_valid(messages) FROM PUBLIC;
DO $$
BEGIN
  EXECUTE format('GRANT EXECUTE ON FUNCTION messages_row_valid(messages) TO %I, %I',
                 current_schema() || '_writer', current_schema() || '_dispatcher');
END
$$;

DROP TRIGGER messages_check_destination ON messages;
DROP FUNCTION messages_check_destination();

CREATE OR REPLACE FUNCTION write_partition_function(n int, wakeup boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
  look boolean := coalesce(wakeup, true);
  latin1 boolean;
  listed text[];
BEGIN
  IF n IS NULL OR n NOT BETWEEN 1 AND 4096 THEN
    RAISE EXCEPTION 'partition count must be 1..4096' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT st.destination_charset = 'latin1', st.allowed_destinations INTO latin1, listed FROM settings st;
  -- Runs for every inserted row, so it is as cheap as it gets: the count, the
  -- channel and the destination rules in force are literals, and instead of
  -- SET search_path (a GUC save and restore per call, about as costly as the
  -- body) every name in the body is qualified, which keeps a security definer
  -- safe from the caller's search_path (pg_temp included). A row pays for a
  -- call only when its headers look suspect, its destination is an address or
  -- a reserved name, or a destination rule set in settings may refuse it
  -- (headers_suspect(), address_or_reserved(), beyond_latin1() and
  -- plain_name_allowed() are inlined); check_inserted_row() then decides with
  -- settings as they are.
  EXECUTE format($def$
CREATE OR REPLACE FUNCTION %1$I.messages_set_partition()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
AS $body$
BEGIN
  IF (NEW.headers OPERATOR(pg_catalog.<>) '{}'::pg_catalog.jsonb AND %1$I.headers_suspect(NEW.headers))
     OR %1$I.address_or_reserved(NEW.destination)%4$s%5$s THEN
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
    ELSE '' END,
    CASE WHEN latin1 THEN format($rule$
     OR %1$I.beyond_latin1(NEW.destination)$rule$, current_schema()) ELSE '' END,
    CASE WHEN listed IS NOT NULL THEN format($rule$
     OR NOT %1$I.plain_name_allowed(NEW.destination, %2$L::pg_catalog.text[])$rule$, current_schema(), listed)
    ELSE '' END);
  EXECUTE format('COMMENT ON FUNCTION %I.messages_set_partition() IS %L', current_schema(),
    format('BEFORE INSERT row trigger of messages: checks headers and destination (check_inserted_row), '
           'partition = (hashtext(coalesce(session_id, message_id)) & 2147483647) %% %s%s. '
           'Generated by write_partition_function() from settings, again on every change of settings; '
           'do not edit. Security definer (writers may not read instances or settings); its body names '
           'only qualified objects instead of pinning search_path.', n,
           CASE WHEN look THEN ', then NOTIFY ' || current_schema() || '_wakeup '
                'if some instance is idle' ELSE ' (no wake-up check)' END));
END
$fn$;

COMMENT ON FUNCTION write_partition_function(int, boolean) IS
  'Internal: writes messages_set_partition() for n partitions and the destination rules now in settings, with '
  'the wake-up check unless wakeup is false. Called by set_partition_count() and on every change of settings.';

CREATE FUNCTION settings_write_insert_trigger()
RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  PERFORM write_partition_function(st.partition_count) FROM settings st;
  RETURN NULL;
END
$$;

COMMENT ON FUNCTION settings_write_insert_trigger() IS
  'AFTER UPDATE statement trigger of settings: writes messages_set_partition() again from the new settings '
  '(write_partition_function()), so the destination rules an insert applies are the ones set.';

CREATE TRIGGER settings_write_insert_trigger
  AFTER UPDATE ON settings
  FOR EACH STATEMENT EXECUTE FUNCTION settings_write_insert_trigger();

REVOKE ALL ON FUNCTION settings_write_insert_trigger() FROM PUBLIC;

COMMENT ON FUNCTION check_inserted_row(text, jsonb) IS
  'Internal, called by messages_set_partition() for a row whose headers look suspect, whose destination is an '
  'address or a reserved name, or which a destination rule set in settings may refuse: SQLSTATE 23514 naming '
  'messages_headers_valid or messages_destination_valid, the problem in DETAIL.';

DO $$
BEGIN
  PERFORM write_partition_function(st.partition_count) FROM settings st;
END
$$;
