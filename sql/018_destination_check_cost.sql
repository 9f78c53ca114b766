-- 018_destination_check_cost: the insert trigger of 016 costs a writer nothing while settings.allowed_destinations is unset.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 016_allowed_destinations.sql, with the same outboxd.schema setting.
--
-- Why: messages_check_destination called destination_allowed() for every
-- inserted row. That SQL function reads settings in a subquery, so it is
-- never inlined: PostgreSQL read its stored body back and planned it again
-- on every call, a third of a writer's enqueue() (about 150 microseconds per
-- call against about 100 without it, 10,000 calls in one transaction). The
-- trigger now asks first whether a list is set at all (a plan cached for the
-- session) and whether the name is an address (an inlined expression), and
-- calls destination_allowed() only for a plain name while a list is set.
-- The rule itself is unchanged.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regprocedure(format('%I.destination_allowed(text)', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 016: apply 001_outbox.sql to 016 first', s
      USING ERRCODE = 'undefined_function';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

CREATE OR REPLACE FUNCTION messages_check_destination()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
  IF (SELECT st.allowed_destinations FROM settings st) IS NULL OR address_or_reserved(NEW.destination) THEN
    RETURN NEW;  -- no list, or an address: the partition trigger checks addresses
  END IF;
  IF NOT destination_allowed(NEW.destination) THEN
    PERFORM check_inserted_row(NEW.destination, '{}');
  END IF;
  RETURN NEW;
END
$$;

COMMENT ON FUNCTION messages_check_destination() IS
  'BEFORE INSERT row trigger of messages: a plain destination outside settings.allowed_destinations fails '
  'with 23514 naming messages_destination_valid (through check_inserted_row). Reads nothing more per row '
  'while the list is unset.';
