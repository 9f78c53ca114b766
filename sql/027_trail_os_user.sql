-- 027_trail_os_user: the trail records the OS user an operator named, never one a writer set.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 026, with the same outboxd.schema setting.
--
-- Why: the operator functions name their caller's OS user through the
-- transaction-local setting outboxd.os_user, which the status trigger
-- reads. Any session may set that setting, so a writer could run
-- SET LOCAL outboxd.os_user = 'console:alice' before its cancel(), and the
-- trail showed that operator's name beside the writer's login role.
--
-- What changes: record_status_change() records os_user only when the
-- session's login role is a member of <schema>_dispatcher, the role the
-- operator functions are granted to (the CLI and the console connect as
-- it); a writer's events get none. db_role (session_user) is unchanged.
--
-- Cost: pg_has_role() once per status change event; the daemon's hot
-- statements fire no trigger function (022).

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regprocedure(format('%I.messages_row_valid(%I.messages)', s, s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 026: apply 001_outbox.sql to 026 first', s
      USING ERRCODE = 'undefined_function';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

CREATE OR REPLACE FUNCTION record_status_change()
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
  -- Named by an operator function, run by a dispatcher login; a writer's setting is not a name.
  os_user text := CASE WHEN pg_has_role(session_user, TG_TABLE_SCHEMA || '_dispatcher', 'MEMBER')
                       THEN nullif(current_setting('outboxd.os_user', true), '') END;
BEGIN
  INSERT INTO row_events (row_id, message_id, action, os_user, detail)
  VALUES (NEW.id, NEW.message_id, action, os_user,
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
  'session_user and, when the login is a member of <schema>_dispatcher, the setting outboxd.os_user that '
  'the operator functions set. Security definer: no role but the owner writes row_events.';
