-- 008_dispatcher_row_check: the dispatcher role may run text_ok(), which the row CHECK of messages calls on every UPDATE.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 007, with the same outboxd.schema setting.
--
-- Why: 005_row_check.sql made the validity rules of messages one CHECK that
-- calls messages_row_valid(), which calls text_ok(). A CHECK runs with the
-- privileges of whoever writes the row, and 003_roles.sql granted text_ok()
-- to writers only. So a login role holding only <schema>_dispatcher could
-- delete rows but not update one: marking with retention keep, recording an
-- attempt, parking, requeue and skip all failed with SQLSTATE 42501
-- ("permission denied for function text_ok"). A superuser never sees this, and
-- a session that had already planned the UPDATE as a superuser kept working.
--
-- text_ok() is pure (a regular expression and a length), so granting it reveals
-- nothing and lets the dispatcher do nothing it could not do before.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regclass(format('%I.messages', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" not found: apply 001_outbox.sql first', s
      USING ERRCODE = 'undefined_table';
  END IF;
  EXECUTE format('GRANT EXECUTE ON FUNCTION %I.text_ok(text, int) TO %I', s, s || '_dispatcher');
END
$$;
