-- 011_inbox: an inbox for consumers that are not workflows: record_received() skips a redelivered message, purge_received() keeps it small.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 003_roles.sql, with the same outboxd.schema setting.
--
-- Why: workflow.record_processed() needs the workflow's state record, so a
-- plain service that answers commands (reserve stock, capture a payment) had
-- no place to remember which message ids it has handled, and every such
-- service had to invent its own table. outboxd publishes at least once, so
-- every consumer that writes needs one.

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

CREATE TABLE received_messages (
  consumer    text NOT NULL,
  message_id  text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, message_id),
  CONSTRAINT received_messages_consumer_valid
    CHECK (length(consumer) BETWEEN 1 AND 128 AND consumer !~ '[[:cntrl:]]'),
  CONSTRAINT received_messages_message_id_valid
    CHECK (length(message_id) BETWEEN 1 AND 128 AND message_id !~ '[[:cntrl:]]')
);

CREATE INDEX received_messages_received_at_idx ON received_messages (received_at);

COMMENT ON TABLE received_messages IS
  'Inbox: inbound message ids each consumer has handled (record_received()), so that a '
  'redelivery changes nothing. Kept until purge_received() removes them: choose a retention '
  'longer than any redelivery can arrive.';

CREATE FUNCTION record_received(consumer text, message_id text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  PERFORM require_text('consumer', record_received.consumer, 128, true);
  PERFORM require_text('message_id', record_received.message_id, 128, true);
  INSERT INTO received_messages (consumer, message_id)
  VALUES (record_received.consumer, record_received.message_id)
  ON CONFLICT ON CONSTRAINT received_messages_pkey DO NOTHING;
  RETURN FOUND;
END
$$;

COMMENT ON FUNCTION record_received(text, text) IS
  'Records that consumer handled inbound message_id and returns true; returns false if it was '
  'recorded before (a duplicate delivery: change nothing, emit nothing). Call it first in the '
  'handler''s transaction; a concurrent duplicate waits for the first transaction and then '
  'returns false (or true, if the first rolled back).';

CREATE FUNCTION purge_received(older_than interval, batch_size int DEFAULT 1000)
RETURNS int
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  purged int;
BEGIN
  IF purge_received.older_than IS NULL OR purge_received.older_than < interval '0' THEN
    RAISE EXCEPTION 'older_than must be a non-negative interval' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF purge_received.batch_size IS NULL OR purge_received.batch_size NOT BETWEEN 1 AND 100000 THEN
    RAISE EXCEPTION 'batch_size must be 1..100000' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  WITH victims AS (
    SELECT r.consumer, r.message_id
      FROM received_messages r
     WHERE r.received_at < now() - purge_received.older_than
     ORDER BY r.received_at
     LIMIT purge_received.batch_size
       FOR UPDATE SKIP LOCKED
  )
  DELETE FROM received_messages r
   USING victims v
   WHERE r.consumer = v.consumer AND r.message_id = v.message_id;
  GET DIAGNOSTICS purged = ROW_COUNT;
  RETURN purged;
END
$$;

COMMENT ON FUNCTION purge_received(interval, int) IS
  'Retention of the inbox: deletes at most batch_size ids received more than older_than ago, '
  'oldest first, and returns how many. Call it repeatedly (each call in its own short '
  'transaction) until it returns less than batch_size.';

-- Writers (applications) use the inbox (UPDATE: the purge locks its victims); the dispatcher never touches it.
DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  EXECUTE format('REVOKE ALL ON FUNCTION %1$I.record_received(text, text), %1$I.purge_received(interval, int) '
                 'FROM PUBLIC', s);
  EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I.received_messages TO %I', s, s || '_writer');
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.record_received(text, text), %1$I.purge_received(interval, int) '
                 'TO %2$I', s, s || '_writer');
END
$$;
