-- 014_operations: failure times, the row_events audit trail, and the operator's requeue, skip and replay of rows, with who did it.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 013_timeout_lock.sql, with the same outboxd.schema and outboxd.workflow_schema settings.
--
-- Why: an operator could count stuck rows but not see since when they fail,
-- nor who skipped or requeued what, and a dispatched row could not be sent
-- again. What changes:
--   - messages.first_failed_at and last_failed_at: the first and the latest
--     failed delivery since the row was last (re)queued; outboxd writes them.
--   - row_events: parked (by trigger, as outboxd parks), requeued, skipped and
--     replayed, each with the login role (session_user), the OS user the CLI
--     passes, and when. The dispatcher may read it, not write it: only these
--     functions do, as security definers.
--   - requeue_parked(), skip_parked() and replay(): the statements of
--     `outboxd requeue`, `skip` and `replay`, each writing its events and
--     waking the dispatchers in the same transaction.
--   - workflow_states(session): the status and version of the workflow state
--     records of a session, for `outboxd timeline`, without granting the
--     dispatcher the workflow tables (nor the records' application data).
--   - purge_row_events(): retention of the trail, never younger than an hour.
--   - the purge's index messages_finished_idx becomes two, one per status, so
--     that dispatched and cancelled rows can be kept for different times.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  IF to_regclass(format('%I.messages', s)) IS NULL OR to_regclass(format('%I.instances', w)) IS NULL THEN
    RAISE EXCEPTION 'schemas "%" and "%" not found: apply 001_outbox.sql and 002_workflow.sql first', s, w
      USING ERRCODE = 'undefined_table';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

-- ---------------------------------------------------------------------------
-- Failure times and retention indexes
-- ---------------------------------------------------------------------------

ALTER TABLE messages ADD COLUMN first_failed_at timestamptz, ADD COLUMN last_failed_at timestamptz;

COMMENT ON COLUMN messages.first_failed_at IS
  'First failed delivery since the row was written or last requeued or replayed (database clock).';
COMMENT ON COLUMN messages.last_failed_at IS 'Latest failed delivery; for a parked row, when it was parked.';

-- Dispatched rows are kept for retention.keep_for_s, cancelled ones (skipped
-- by an operator or cancelled by their writer) for retention.failed_keep_for_s:
-- one index each, so that neither purge walks the other's rows.
DROP INDEX messages_finished_idx;
CREATE INDEX messages_dispatched_idx ON messages (dispatched_at) WHERE status = 'dispatched';
CREATE INDEX messages_cancelled_idx ON messages (cancelled_at) WHERE status = 'cancelled';

-- ---------------------------------------------------------------------------
-- The audit trail
-- ---------------------------------------------------------------------------

CREATE TABLE row_events (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  row_id     bigint NOT NULL,
  message_id text NOT NULL,
  action     text NOT NULL CONSTRAINT row_events_action_valid
               CHECK (action IN ('parked', 'requeued', 'skipped', 'replayed')),
  db_role    text NOT NULL DEFAULT session_user,
  os_user    text CONSTRAINT row_events_os_user_valid CHECK (os_user ~ '^[^[:cntrl:]]+$' AND length(os_user) <= 128),
  at         timestamptz NOT NULL DEFAULT now(),
  detail     text
);

CREATE INDEX row_events_message_idx ON row_events (message_id, id);
CREATE INDEX row_events_at_idx ON row_events (at);

COMMENT ON TABLE row_events IS
  'What happened to outbox rows besides being sent: parked by outboxd, requeued, skipped or replayed '
  'by an operator. db_role is the login role (session_user), os_user what the CLI passed. Written only by '
  'the functions of 014_operations.sql; purged after retention.failed_keep_for_s (purge_row_events()).';
COMMENT ON COLUMN row_events.row_id IS 'messages.id of the row, which may since have been purged.';
COMMENT ON COLUMN row_events.detail IS 'parked, requeued, skipped: the last error before the action; replayed: when the row was dispatched and due.';

-- The row's events, one statement for all rows an action changed.
CREATE FUNCTION record_events(action text, row_ids bigint[], os_user text)
RETURNS void
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
  INSERT INTO row_events (row_id, message_id, action, os_user, detail)
  SELECT m.id, m.message_id, record_events.action, record_events.os_user,
         CASE WHEN record_events.action = 'replayed'
              THEN format('was dispatched at %s, due at %s', m.dispatched_at, m.due_at)
              ELSE m.last_error END
    FROM messages m WHERE m.id = ANY (record_events.row_ids) ORDER BY m.id
$$;

COMMENT ON FUNCTION record_events(text, bigint[], text) IS
  'Internal: writes one row_events row per row id, before the action changes the rows.';

CREATE FUNCTION record_parked()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
  INSERT INTO row_events (row_id, message_id, action, detail)
  VALUES (NEW.id, NEW.message_id, 'parked', NEW.last_error);
  RETURN NULL;
END
$$;

COMMENT ON FUNCTION record_parked() IS
  'AFTER UPDATE trigger of messages (messages_parked_event): a row that becomes parked gets a parked '
  'event with its last error. Security definer: the dispatcher may not write row_events itself.';

-- WHEN keeps the dispatcher's marks and backoffs from calling it at all.
CREATE TRIGGER messages_parked_event
  AFTER UPDATE OF status ON messages
  FOR EACH ROW
  WHEN (NEW.status = 'parked' AND OLD.status IS DISTINCT FROM 'parked')
  EXECUTE FUNCTION record_parked();

-- ---------------------------------------------------------------------------
-- Operator actions
-- ---------------------------------------------------------------------------

-- Parked rows named by id, of a session, or all of them; locked in id order,
-- so that two operators acting at once wait for each other instead of deadlocking.
CREATE FUNCTION lock_parked(message_ids text[], session_id text, all_parked boolean)
RETURNS bigint[]
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
  SELECT coalesce(array_agg(t.id ORDER BY t.id), '{}') FROM (
    SELECT m.id FROM messages m
     WHERE m.status = 'parked'
       AND (m.message_id = ANY (lock_parked.message_ids) OR m.session_id = lock_parked.session_id
            OR coalesce(lock_parked.all_parked, false))
     ORDER BY m.id FOR UPDATE) t
$$;

COMMENT ON FUNCTION lock_parked(text[], text, boolean) IS 'Internal: locks and returns the ids of the parked rows named.';

CREATE FUNCTION wake_dispatchers()
RETURNS void
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
  SELECT pg_notify(current_schema() || '_wakeup', '')
$$;

COMMENT ON FUNCTION wake_dispatchers() IS
  'Internal: NOTIFY <schema>_wakeup at commit, busy or idle: a session an operator unblocked may be one '
  'a busy dispatcher has stopped looking at.';

-- requeue and skip: lock the rows, record the events (with the last error
-- before the change), change the rows, wake the dispatchers.
CREATE FUNCTION change_parked(action text, message_ids text[], session_id text, all_parked boolean, os_user text)
RETURNS SETOF text
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  ids bigint[];
BEGIN
  PERFORM require_text('os_user', os_user, 128);
  ids := lock_parked(message_ids, session_id, all_parked);
  PERFORM record_events(action, ids, os_user);
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
  IF cardinality(ids) > 0 THEN
    PERFORM wake_dispatchers();
  END IF;
END
$$;

COMMENT ON FUNCTION change_parked(text, text[], text, boolean, text) IS
  'Internal: the body of requeue_parked() (action requeued) and skip_parked() (action skipped).';

CREATE FUNCTION requeue_parked(message_ids text[], session_id text DEFAULT NULL, all_parked boolean DEFAULT false,
                               os_user text DEFAULT NULL)
RETURNS SETOF text
LANGUAGE sql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
  SELECT change_parked('requeued', message_ids, session_id, all_parked, os_user)
$$;

COMMENT ON FUNCTION requeue_parked(text[], text, boolean, text) IS
  'outboxd requeue: the parked rows with these message ids, of session_id, or all of them (all_parked) '
  'become pending with attempts 0, so their sessions move on; each gets a requeued event with the login '
  'role and os_user. Returns the message ids requeued.';

CREATE FUNCTION skip_parked(message_ids text[], session_id text DEFAULT NULL, all_parked boolean DEFAULT false,
                            os_user text DEFAULT NULL)
RETURNS SETOF text
LANGUAGE sql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
  SELECT change_parked('skipped', message_ids, session_id, all_parked, os_user)
$$;

COMMENT ON FUNCTION skip_parked(text[], text, boolean, text) IS
  'outboxd skip: the parked rows named as for requeue_parked() are given up (cancelled, never published, '
  'last_error says skipped by operator), so their sessions move on; each gets a skipped event. '
  'Returns the message ids skipped.';

-- The dispatched rows a replay names, in id order, at most max_rows of them
-- (matched counts them all).
CREATE FUNCTION replay_targets(message_ids text[], session_id text, destination text,
                               since timestamptz, until timestamptz, max_rows int)
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
       AND (replay_targets.message_ids IS NULL OR m.message_id = ANY (replay_targets.message_ids))
       AND (replay_targets.session_id IS NULL OR m.session_id = replay_targets.session_id)
       AND (replay_targets.destination IS NULL OR m.destination = replay_targets.destination)
       AND (replay_targets.since IS NULL OR m.dispatched_at >= replay_targets.since)
       AND (replay_targets.until IS NULL OR m.dispatched_at < replay_targets.until)
     ORDER BY m.id LIMIT max_rows;
END
$$;

COMMENT ON FUNCTION replay_targets(text[], text, text, timestamptz, timestamptz, int) IS
  'Internal: the dispatched rows replay() names, in id order, with how many match in all.';

CREATE FUNCTION replay(message_ids text[], session_id text, destination text, since timestamptz, until timestamptz,
                       max_rows int, dry_run boolean, os_user text DEFAULT NULL)
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
  -- waiting_behind: pending rows of the session after this one, which the replay puts behind it.
  RETURN QUERY
    SELECT m.message_id, m.session_id, total,
           (SELECT count(*) FROM messages p WHERE p.session_id = m.session_id AND p.id > m.id
              AND p.status = 'pending')
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
  'follow each. dry_run changes nothing; otherwise more than max_rows matching rows is an error (54000) '
  'and each row gets a replayed event.';

CREATE FUNCTION purge_row_events(older_than interval, batch_size int)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  purged int;
BEGIN
  IF older_than IS NULL OR older_than < interval '1 hour' OR batch_size IS NULL OR batch_size < 1 THEN
    RAISE EXCEPTION 'purge_row_events keeps at least an hour of events, in batches of at least 1'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  DELETE FROM row_events e WHERE e.id IN (
    SELECT o.id FROM row_events o WHERE o.at < now() - older_than ORDER BY o.at LIMIT batch_size
       FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS purged = ROW_COUNT;
  RETURN purged;
END
$$;

COMMENT ON FUNCTION purge_row_events(interval, int) IS
  'Deletes up to batch_size row_events older than older_than (at least an hour, so that a role that may '
  'purge cannot erase what it just did) and returns how many.';

-- ---------------------------------------------------------------------------
-- Workflow state of a session
-- ---------------------------------------------------------------------------

DO $$
BEGIN
  PERFORM set_config('search_path', format('%I, %s',
    coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow'),
    current_setting('search_path')), false);
END
$$;

-- A workflow's messages carry its id as session_id (emit(), set_timeout());
-- correlation ids find a workflow whose messages went out in other sessions.
CREATE FUNCTION workflow_states(session_id text)
RETURNS TABLE (id text, kind text, status text, version bigint, correlation_id text,
               timeout_message_id text, timeout_due_at timestamptz, created_at timestamptz, updated_at timestamptz)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
  SELECT i.id, i.kind, i.status, i.version, i.correlation_id, i.timeout_message_id, i.timeout_due_at,
         i.created_at, i.updated_at
    FROM instances i
   WHERE i.id = workflow_states.session_id
      OR i.correlation_id IN (SELECT m.correlation_id FROM messages m
                               WHERE m.session_id = workflow_states.session_id AND m.correlation_id IS NOT NULL)
   ORDER BY i.created_at, i.id
   LIMIT 100
$$;

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  -- Created in the workflow schema's search path but named in the outbox schema.
  EXECUTE format('ALTER FUNCTION %I.workflow_states(text) SET SCHEMA %I', w, s);
  EXECUTE format('COMMENT ON FUNCTION %I.workflow_states(text) IS %L', s,
    'The workflow state records (id, kind, status, version, timeout; not data) whose id is session_id, or '
    'whose correlation_id a row of the session carries; at most 100. Security definer: the dispatcher '
    'role may not read the workflow tables.');
END
$$;

-- ---------------------------------------------------------------------------
-- Grants
-- ---------------------------------------------------------------------------

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  dispatcher text := s || '_dispatcher';
BEGIN
  EXECUTE format('REVOKE ALL ON FUNCTION %1$I.record_events(text, bigint[], text), %1$I.record_parked(), '
                 '%1$I.lock_parked(text[], text, boolean), %1$I.wake_dispatchers(), '
                 '%1$I.change_parked(text, text[], text, boolean, text), '
                 '%1$I.requeue_parked(text[], text, boolean, text), %1$I.skip_parked(text[], text, boolean, text), '
                 '%1$I.replay_targets(text[], text, text, timestamptz, timestamptz, int), '
                 '%1$I.replay(text[], text, text, timestamptz, timestamptz, int, boolean, text), '
                 '%1$I.purge_row_events(interval, int), %1$I.workflow_states(text) FROM PUBLIC', s);
  EXECUTE format('GRANT SELECT ON %I.row_events TO %I', s, dispatcher);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.requeue_parked(text[], text, boolean, text), '
                 '%1$I.skip_parked(text[], text, boolean, text), '
                 '%1$I.replay(text[], text, text, timestamptz, timestamptz, int, boolean, text), '
                 '%1$I.purge_row_events(interval, int), %1$I.workflow_states(text) TO %2$I', s, dispatcher);
END
$$;
