-- 022_row_trail: the database itself writes the audit trail of every status change, and no role but the owner can change a row past it.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 021, with the same outboxd.schema setting.
--
-- Why: the dispatcher held table-wide UPDATE and DELETE on messages. It could
-- requeue a parked or dispatched row with a plain UPDATE and leave no event,
-- rewrite a row's body, headers, destination or writer, overwrite the last
-- error of a parked row, reschedule a row (due_at), or delete a parked row.
-- And purge_row_events() compared intervals (a month counts 30 days) but cut
-- at now() - older_than (calendar months), so '-1 year 364 days' passed the
-- one-hour check and purged every event. What changes:
--   - the dispatcher may UPDATE only the columns outboxd marks: status,
--     attempts, next_attempt_at, last_error, dispatched_at, first_failed_at,
--     last_failed_at. Never the payload, the addressing, the writer, due_at
--     nor the partition.
--   - messages_guard_update: a role that is not the table owner may change a
--     pending row only to pending (retry bookkeeping), dispatched or parked;
--     any other change, and any change of a row that is not pending, is
--     refused (42501) naming the function that does it: requeue_parked(),
--     skip_parked(), replay(), cancel(). Those run as the owner and pass.
--   - messages_guard_delete: such a role may delete pending rows (delete mode:
--     the broker accepted them) and dispatched or cancelled ones (retention),
--     never a parked row, whose trail would end without an outcome.
--   - messages_status_event: every status change but pending -> dispatched
--     writes its row_events row with session_user: parked, requeued, skipped,
--     replayed, and cancelled (the writer's cancel()). A dispatch is recorded
--     by dispatched_at, or in delete mode by the row's removal. The functions
--     pass the OS user their caller names through the transaction-local
--     setting outboxd.os_user, which the trigger reads; record_events() and
--     record_parked() are gone.
--   - fire_scheduled(): `outboxd fire` moves a scheduled pending row's due_at
--     to now() and writes a fired event; due_at is no longer the dispatcher's.
--   - replay() refuses a NULL dry_run, which skipped the limit and the lock.
--   - purge_row_events() compares its cutoff, a timestamp, with now() - 1 hour.
--
-- Cost: the daemon's hot statements (mark_dispatched: pending -> dispatched,
-- record_failures: pending -> pending, delete_dispatched: deleting pending
-- rows) never call a trigger function: each trigger's WHEN clause, evaluated
-- by the executor without entering PL/pgSQL, is false for them. Parking a row
-- (pending -> parked) calls the event function once, as before.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regprocedure(format('%I.destination_allowed(text)', s)) IS NULL
     OR to_regclass(format('%I.row_events', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 021: apply 001_outbox.sql to 021 first', s
      USING ERRCODE = 'undefined_table';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

-- ---------------------------------------------------------------------------
-- The trail, written by the database
-- ---------------------------------------------------------------------------

ALTER TABLE row_events DROP CONSTRAINT row_events_action_valid,
  ADD CONSTRAINT row_events_action_valid
    CHECK (action IN ('parked', 'requeued', 'skipped', 'replayed', 'cancelled', 'fired', 'dispatched'));

COMMENT ON TABLE row_events IS
  'What happened to outbox rows besides being sent: every status change but pending -> dispatched '
  '(written by the trigger messages_status_event) and fire_scheduled(). db_role is the login role '
  '(session_user), os_user what the CLI passed (unverified). Purged after retention.failed_keep_for_s '
  '(purge_row_events()).';
COMMENT ON COLUMN row_events.os_user IS
  'The OS user the caller named (setting outboxd.os_user, set by the operator functions): a hint, not '
  'verified by the database; db_role is the fact.';
COMMENT ON COLUMN row_events.detail IS
  'parked: the last error; requeued, skipped, cancelled: the last error before the change; replayed: when '
  'the row was dispatched and due; fired: when it was due; dispatched (by the owner, from another status '
  'than pending): the status before.';

CREATE FUNCTION record_status_change()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  action text := CASE NEW.status
    WHEN 'parked' THEN 'parked'
    WHEN 'cancelled' THEN CASE OLD.status WHEN 'parked' THEN 'skipped' ELSE 'cancelled' END
    WHEN 'pending' THEN CASE OLD.status WHEN 'dispatched' THEN 'replayed' ELSE 'requeued' END
    ELSE 'dispatched' END;
BEGIN
  INSERT INTO row_events (row_id, message_id, action, os_user, detail)
  VALUES (NEW.id, NEW.message_id, action, nullif(current_setting('outboxd.os_user', true), ''),
          CASE action
            WHEN 'parked' THEN NEW.last_error
            WHEN 'replayed' THEN format('was dispatched at %s, due at %s', OLD.dispatched_at, OLD.due_at)
            WHEN 'dispatched' THEN format('was %s', OLD.status)
            ELSE OLD.last_error END);
  RETURN NULL;
END
$$;

COMMENT ON FUNCTION record_status_change() IS
  'AFTER UPDATE trigger of messages (messages_status_event): one row_events row per status change, with '
  'session_user and the setting outboxd.os_user. Security definer: no role but the owner writes row_events.';

DROP TRIGGER messages_parked_event ON messages;
DROP FUNCTION record_parked();

-- The WHEN clause keeps the dispatcher's marks (pending -> dispatched) and
-- backoffs (pending -> pending) out of PL/pgSQL.
CREATE TRIGGER messages_status_event
  AFTER UPDATE OF status ON messages
  FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status AND NOT (OLD.status = 'pending' AND NEW.status = 'dispatched'))
  EXECUTE FUNCTION record_status_change();

-- ---------------------------------------------------------------------------
-- What a role that is not the owner may change
-- ---------------------------------------------------------------------------

-- Not a security definer: it asks whether the role running the statement
-- (the owner inside the schema's own functions) holds the table owner's rights.
CREATE FUNCTION messages_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  use text;
BEGIN
  IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
    RETURN NULL;
  END IF;
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'role % may not delete the % row %', current_user, OLD.status, OLD.message_id
      USING ERRCODE = 'insufficient_privilege',
            HINT = 'Requeue it with requeue_parked() (outboxd requeue) or give it up with skip_parked() '
                   '(outboxd skip); the purge removes it once cancelled.';
  END IF;
  use := CASE
    WHEN OLD.status = 'parked' THEN 'requeue_parked() (outboxd requeue) or skip_parked() (outboxd skip)'
    WHEN OLD.status = 'dispatched' THEN 'replay() (outboxd replay)'
    WHEN NEW.status = 'cancelled' THEN 'cancel() (its writer) or skip_parked() once parked'
    ELSE 'requeue_parked(), skip_parked(), replay() or cancel()' END;
  RAISE EXCEPTION 'role % may not change the % row % to %: use %', current_user, OLD.status, OLD.message_id,
                  NEW.status, use
    USING ERRCODE = 'insufficient_privilege',
          DETAIL = 'outboxd changes only pending rows: to dispatched, parked, or pending with its retry '
                   'bookkeeping. Every other change goes through a function that writes row_events.';
END
$$;

COMMENT ON FUNCTION messages_guard() IS
  'AFTER UPDATE and DELETE trigger of messages (messages_guard_update, messages_guard_delete): refuses '
  '(42501), and so undoes, a change the dispatcher may not make directly unless the role running it holds '
  'the table owner''s rights, as the schema''s security-definer functions do.';

-- The WHEN clauses are false for every statement outboxd runs, which
-- therefore never enter PL/pgSQL: marks, retries and parks of pending rows,
-- deleting accepted pending rows, purging dispatched and cancelled ones.
-- AFTER, not BEFORE: a BEFORE row trigger makes every UPDATE and DELETE lock
-- its row first, a WAL record per row, even when its WHEN clause is false;
-- an AFTER trigger's error undoes the statement all the same.
CREATE TRIGGER messages_guard_update
  AFTER UPDATE ON messages
  FOR EACH ROW
  WHEN (OLD.status <> 'pending' OR NEW.status NOT IN ('pending', 'dispatched', 'parked'))
  EXECUTE FUNCTION messages_guard();

CREATE TRIGGER messages_guard_delete
  AFTER DELETE ON messages
  FOR EACH ROW
  WHEN (OLD.status NOT IN ('pending', 'dispatched', 'cancelled'))
  EXECUTE FUNCTION messages_guard();

-- ---------------------------------------------------------------------------
-- The operator's functions: the trigger writes their events
-- ---------------------------------------------------------------------------

-- NULL clears it, so that nothing later in the transaction is attributed to it.
CREATE FUNCTION name_os_user(os_user text)
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  PERFORM require_text('os_user', os_user, 128);
  PERFORM set_config('outboxd.os_user', coalesce(os_user, ''), true);
END
$$;

COMMENT ON FUNCTION name_os_user(text) IS
  'Internal: checks os_user and sets outboxd.os_user for the events of the statements that follow.';

CREATE OR REPLACE FUNCTION change_parked(action text, message_ids text[], session_id text, all_parked boolean,
                                         os_user text)
RETURNS SETOF text
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  ids bigint[];
BEGIN
  PERFORM name_os_user(os_user);
  ids := lock_parked(message_ids, session_id, all_parked);
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
  -- NULL would be neither a dry run nor a checked one: it skipped the limit and the lock.
  IF dry_run IS NULL THEN
    RAISE EXCEPTION 'replay needs dry_run true or false, not NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
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

COMMENT ON FUNCTION replay(text[], text, text, timestamptz, timestamptz, int, boolean, text) IS
  'outboxd replay: dispatched rows (retention keep) named by message ids, session and/or destination, '
  'dispatched in [since, until), become pending again with the same id and message_id, due now as '
  'scheduled rows: they go out in id order within their session, ahead of its later pending rows not '
  'yet claimed. Returns the rows in id order with how many match and how many pending rows of the session '
  'by the same writer follow each. dry_run (true or false, never NULL) changes nothing; otherwise more than '
  'max_rows matching rows is an error (54000) and each row gets a replayed event.';

DROP FUNCTION record_events(text, bigint[], text);

-- The row a scheduled claim holds is due already: the lock waits for the
-- claim, and a row it dispatched meanwhile no longer matches.
CREATE FUNCTION fire_scheduled(message_id text, session_id text, os_user text DEFAULT NULL)
RETURNS SETOF text
LANGUAGE sql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
  SELECT require_text('os_user', fire_scheduled.os_user, 128);
  WITH due AS (
    SELECT t.id, t.due_at FROM messages t
     WHERE t.status = 'pending' AND t.due_at > now()
       AND (t.message_id = fire_scheduled.message_id OR t.session_id = fire_scheduled.session_id)
     ORDER BY t.id FOR UPDATE),
  fired AS (
    UPDATE messages m SET due_at = now() FROM due WHERE m.id = due.id
    RETURNING m.id, m.message_id, due.due_at AS was_due),
  recorded AS (
    INSERT INTO row_events (row_id, message_id, action, os_user, detail)
    SELECT f.id, f.message_id, 'fired', fire_scheduled.os_user, format('was due at %s', f.was_due)
      FROM fired f ORDER BY f.id)
  SELECT f.message_id FROM fired f ORDER BY f.id
$$;

COMMENT ON FUNCTION fire_scheduled(text, text, text) IS
  'outboxd fire: the scheduled pending rows (due_at in the future) with this message_id or of this session '
  'become due now; each gets a fired event with the login role and os_user. Returns their message ids.';

CREATE OR REPLACE FUNCTION purge_row_events(older_than interval, batch_size int)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  -- A timestamp, compared as one: an interval's months count 30 days, the calendar's do not.
  cutoff timestamptz := now() - older_than;
  purged int;
BEGIN
  IF cutoff IS NULL OR cutoff > now() - interval '1 hour' OR batch_size IS NULL OR batch_size < 1 THEN
    RAISE EXCEPTION 'purge_row_events keeps at least an hour of events, in batches of at least 1'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  DELETE FROM row_events e WHERE e.id IN (
    SELECT o.id FROM row_events o WHERE o.at < cutoff ORDER BY o.at LIMIT batch_size
       FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS purged = ROW_COUNT;
  RETURN purged;
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
  EXECUTE format('REVOKE ALL ON FUNCTION %1$I.record_status_change(), %1$I.messages_guard(), '
                 '%1$I.name_os_user(text), %1$I.fire_scheduled(text, text, text) FROM PUBLIC', s);
  -- Revoking the table's UPDATE revokes any column UPDATE too: the list below is the whole grant.
  EXECUTE format('REVOKE UPDATE ON %I.messages FROM %I', s, dispatcher);
  EXECUTE format('GRANT UPDATE (status, attempts, next_attempt_at, last_error, dispatched_at, first_failed_at, '
                 'last_failed_at) ON %I.messages TO %I', s, dispatcher);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %I.fire_scheduled(text, text, text) TO %I', s, dispatcher);
END
$$;
