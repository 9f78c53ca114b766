-- 016_allowed_destinations: the DBA may restrict plain destination names too, and so bound the queues a broker creates for them.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 013, with the same outboxd.schema setting.
--
-- Why: with the rabbitmq profile every new plain destination declares a
-- durable queue, so a writer could create queues without end. Full addresses
-- and reserved names were already bound by settings.allowed_address_prefixes
-- (009); plain names were not.
--
-- What changes:
--   - settings.allowed_destinations: the plain names writers may use, each
--     an exact name or, ending in "*", a prefix. NULL (the default): any
--     plain name, as before.
--   - destination_problem() also refuses a plain name outside that list, so
--     enqueue() and a plain INSERT refuse it as they refuse an address:
--     23514 naming messages_destination_valid, the rule in DETAIL.
--   - The trigger messages_check_destination (BEFORE INSERT) applies it to
--     plain names, and only while the list is set: one look at settings per
--     row; the partition trigger goes on checking addresses.
--   - destination_allowed(): the same rule for rows already stored, which
--     the dispatcher may call; outboxd parks such a row instead of sending it.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regprocedure(format('%I.destination_problem(text)', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 009: apply 001_outbox.sql to 013 first', s
      USING ERRCODE = 'undefined_function';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

ALTER TABLE settings ADD COLUMN allowed_destinations text[];

COMMENT ON COLUMN settings.allowed_destinations IS
  'Plain destination names writers may use: exact names, or prefixes ending in "*". NULL: any plain name. '
  'With the rabbitmq profile each new name is a new durable queue: this list bounds them. Set by the DBA.';

-- True if a plain name is in the list (a list of NULL allows every name).
CREATE FUNCTION plain_name_allowed(destination text, allowed text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path FROM CURRENT
RETURN allowed IS NULL OR EXISTS (
  SELECT FROM unnest(allowed) a
   WHERE a = destination OR (right(a, 1) = '*' AND starts_with(destination, left(a, -1))));

COMMENT ON FUNCTION plain_name_allowed(text, text[]) IS
  'True if allowed is NULL, or destination equals one of its entries or starts with one ending in "*" (less the *).';

CREATE FUNCTION destination_allowed(destination text)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path FROM CURRENT
RETURN address_or_reserved(destination)
    OR plain_name_allowed(destination, (SELECT st.allowed_destinations FROM settings st));

COMMENT ON FUNCTION destination_allowed(text) IS
  'False for a plain name outside settings.allowed_destinations (addresses answer to allowed_address_prefixes, '
  'checked when the row was written): the dispatcher parks such a row instead of creating its queue.';

CREATE OR REPLACE FUNCTION destination_problem(destination text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
BEGIN
  IF NOT address_or_reserved(destination) THEN
    IF destination_allowed(destination) THEN
      RETURN NULL;
    END IF;
    RETURN 'a plain destination name must be listed in settings.allowed_destinations';
  END IF;
  IF EXISTS (SELECT FROM settings st, unnest(st.allowed_address_prefixes) p
              WHERE p <> '' AND starts_with(destination, p)) THEN
    RETURN NULL;
  END IF;
  RETURN 'a full broker address or a reserved name needs a prefix listed in settings.allowed_address_prefixes';
END
$$;

COMMENT ON FUNCTION destination_problem(text) IS
  'NULL if writers may use destination, else why not: a plain name must be in settings.allowed_destinations '
  'when that is set; one starting with "/", holding "://" or starting with amq., activemq. or $ must start '
  'with a prefix in settings.allowed_address_prefixes.';

-- Security definer: writers may not read settings.
CREATE FUNCTION messages_check_destination()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
  IF NOT destination_allowed(NEW.destination) THEN
    PERFORM check_inserted_row(NEW.destination, '{}');
  END IF;
  RETURN NEW;
END
$$;

COMMENT ON FUNCTION messages_check_destination() IS
  'BEFORE INSERT row trigger of messages: a plain destination outside settings.allowed_destinations fails '
  'with 23514 naming messages_destination_valid (through check_inserted_row).';

CREATE TRIGGER messages_check_destination
  BEFORE INSERT ON messages
  FOR EACH ROW EXECUTE FUNCTION messages_check_destination();

REVOKE ALL ON FUNCTION plain_name_allowed(text, text[]), destination_allowed(text), messages_check_destination()
  FROM PUBLIC;
DO $$
BEGIN
  EXECUTE format('GRANT EXECUTE ON FUNCTION address_or_reserved(text), plain_name_allowed(text, text[]), '
                 'destination_allowed(text) TO %I', current_schema() || '_dispatcher');
END
$$;
