-- 019_writer_session_scope: a session is its writer's: rows of one session_id written by different writers are ordered apart.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 018_destination_check_cost.sql, with the same outboxd.schema setting.
--
-- Why: rows of a session are published strictly in id order, and a parked
-- or backing-off row holds back every later row of its session. A session id
-- is the writer's to choose (an order number, say), so two applications may
-- pick the same one; one application's parked row then held back the other's
-- rows, which that application could neither see, cancel nor skip. The order
-- scope is now (writer, session_id): the claim's blocked and held-back tests
-- compare messages.writer (IS NOT DISTINCT FROM, so rows written before 009,
-- without writer, are a scope of their own), and so does every count of rows
-- waiting behind another. Partitions still hash session_id alone, and the
-- AMQP group-id is still session_id. What changes here:
--   - replay()'s waiting_behind counts the pending rows after each replayed
--     row in its writer's session only, as they are the rows the replay puts
--     behind it.
--   - the comment of messages.session_id says so.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regprocedure(format('%I.replay(text[], text, text, timestamptz, timestamptz, int, boolean, text)', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 014: apply 001_outbox.sql to 018 first', s
      USING ERRCODE = 'undefined_function';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

COMMENT ON COLUMN messages.session_id IS
  'Ordering key (AMQP group-id): the rows of a session by one writer are published in id order, and a parked '
  'or backing-off row holds back only its own writer''s later rows of the session.';

CREATE OR REPLACE FUNCTION replay(message_ids text[], session_id text, destination text, since timestamptz,
                                  until timestamptz, max_rows int, dry_run boolean, os_user text DEFAULT NULL)
RETURNS TABLE (message_id text, row_session text, matched bigint, waiting_behind bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  ids bigint[];
  total bigint;
BEGIN
  PERFORM require_text('os_user', os_user, 128);
  SELECT coalesce(array_agg(t.row_id ORDER BY t.row_id), '{}'), coalesce(max(t.matched), 0)
    INTO ids, total
    FROM replay_targets(message_ids, session_id, destination, since, until, max_rows) t;
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
  PERFORM record_events('replayed', ids, os_user);
  -- Due now and later than created: a scheduled row, which the claim takes
  -- in its session's id order and which holds back the session's later rows
  -- until it is accepted, as a timeout that falls due does. The partition is
  -- derived again: set_partition_count() re-hashes only pending and parked rows.
  UPDATE messages m
     SET status = 'pending', dispatched_at = NULL, attempts = 0, next_attempt_at = NULL, last_error = NULL,
         first_failed_at = NULL, last_failed_at = NULL,
         due_at = greatest(now(), m.created_at + interval '1 microsecond'),
         partition = (hashtext(coalesce(m.session_id, m.message_id))::bigint & 2147483647)
                     % (SELECT st.partition_count FROM settings st)
   WHERE m.id = ANY (ids);
  PERFORM wake_dispatchers();
END
$$;

COMMENT ON FUNCTION replay(text[], text, text, timestamptz, timestamptz, int, boolean, text) IS
  'outboxd replay: dispatched rows (retention keep) named by message ids, session and/or destination, '
  'dispatched in [since, until), become pending again with the same id and message_id, due now as '
  'scheduled rows: they go out in id order within their session, ahead of its later pending rows not '
  'yet claimed. Returns the rows in id order with how many match and how many pending rows of the session '
  'by the same writer follow each. dry_run changes nothing; otherwise more than max_rows matching rows is '
  'an error (54000) and each row gets a replayed event.';
