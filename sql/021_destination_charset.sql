-- 021_destination_charset: the DBA may require destinations in Latin-1, which RabbitMQ 3.x needs of every address.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 020, with the same outboxd.schema setting.
--
-- Why: RabbitMQ 3.x's AMQP 1.0 plugin closes the whole connection, and so
-- every link on it, when a link is attached to an address with a character
-- outside Latin-1 ("/queue/заказы"; "/queue/café" is fine). No rule refused
-- such a name when it was written: a prefix "billing.*" in
-- allowed_destinations admits "billing.ж".
--
-- What changes:
--   - settings.destination_charset: 'any' (the default, as before) or
--     'latin1': then every destination, plain name or full address, with a
--     character above U+00FF is refused.
--   - beyond_latin1(): the test, inlined where it is used.
--   - destination_problem() applies it before the other rules, so a plain
--     INSERT fails with 23514 naming messages_destination_valid, the rule in
--     DETAIL; so does enqueue() for a plain name, and for a full address it
--     raises 22023 as it does for the address rule (the same DETAIL).
--   - The trigger messages_check_destination reads both settings in the one
--     look at settings it already took per row, and calls nothing more while
--     allowed_destinations is unset and destination_charset is 'any'.
--   - destination_allowed(): false for a stored row beyond Latin-1 while the
--     setting is latin1; outboxd parks such a row instead of sending it.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regclass(format('%I.messages_lane_idx', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 020: apply 001_outbox.sql to 020 first', s
      USING ERRCODE = 'undefined_table';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

ALTER TABLE settings ADD COLUMN destination_charset text NOT NULL DEFAULT 'any'
  CONSTRAINT settings_destination_charset_known CHECK (destination_charset IN ('any', 'latin1'));

COMMENT ON COLUMN settings.destination_charset IS
  'any (default): destinations may hold any character. latin1: a destination with a character above U+00FF is '
  'refused when written, and a stored one parked unsent. Set to latin1 for RabbitMQ 3.x, whose AMQP 1.0 plugin '
  'closes the connection on an address outside Latin-1. Set by the DBA.';

-- SQL-standard body, no SET: inlined into the caller's plan, as address_or_reserved().
-- Bracket ranges compare code points; in a UTF8 database (and a LATIN1 one) that is Unicode's order.
CREATE FUNCTION beyond_latin1(destination text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN destination ~ '[^\u0001-\u00ff]';

COMMENT ON FUNCTION beyond_latin1(text) IS
  'True if destination holds a character above U+00FF (outside Latin-1): refused while '
  'settings.destination_charset is latin1.';

CREATE OR REPLACE FUNCTION destination_allowed(destination text)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path FROM CURRENT
RETURN (address_or_reserved(destination)
        OR plain_name_allowed(destination, (SELECT st.allowed_destinations FROM settings st)))
   AND NOT ((SELECT st.destination_charset = 'latin1' FROM settings st) AND beyond_latin1(destination));

COMMENT ON FUNCTION destination_allowed(text) IS
  'False for a plain name outside settings.allowed_destinations, and for any destination beyond Latin-1 while '
  'settings.destination_charset is latin1 (addresses otherwise answer to allowed_address_prefixes, checked when '
  'the row was written): the dispatcher parks such a row instead of sending it.';

-- Each function below reads settings in one query without parameters and
-- tests the name in a plain IF (an expression PL/pgSQL evaluates without the
-- executor). With the name inside the query, PostgreSQL would plan it afresh
-- on every call: a plan for the name at hand folds beyond_latin1() of it to a
-- constant, looks cheaper than the generic plan, and so keeps being chosen,
-- a planning per insert like the one 018 removed.

-- For an address, which enqueue() and the partition trigger ask about on
-- every insert of one, one look at settings as before.
CREATE OR REPLACE FUNCTION destination_problem(destination text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
DECLARE
  latin1 boolean;
  listed text[];
  prefixes text[];
BEGIN
  SELECT st.destination_charset = 'latin1', st.allowed_destinations, st.allowed_address_prefixes
    INTO latin1, listed, prefixes
    FROM settings st;
  IF latin1 AND beyond_latin1(destination) THEN
    RETURN 'destination names must be Latin-1 (settings.destination_charset)';
  END IF;
  IF NOT address_or_reserved(destination) THEN
    IF plain_name_allowed(destination, listed) THEN
      RETURN NULL;
    END IF;
    RETURN 'a plain destination name must be listed in settings.allowed_destinations';
  END IF;
  IF destination ^@ ANY (array_remove(prefixes, '')) THEN  -- starts with one
    RETURN NULL;
  END IF;
  RETURN 'a full broker address or a reserved name needs a prefix listed in settings.allowed_address_prefixes';
END
$$;

COMMENT ON FUNCTION destination_problem(text) IS
  'NULL if writers may use destination, else why not: while settings.destination_charset is latin1 it must be '
  'Latin-1; a plain name must be in settings.allowed_destinations when that is set; one starting with "/", '
  'holding "://" or starting with amq., activemq. or $ must start with a prefix in '
  'settings.allowed_address_prefixes.';

-- While the list is unset and the charset is any, an insert reads settings
-- once, as it did, and calls no function. plain_name_allowed() directly, not
-- destination_allowed(), whose body would read settings again.
CREATE OR REPLACE FUNCTION messages_check_destination()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  latin1 boolean;
  listed text[];
BEGIN
  SELECT st.destination_charset = 'latin1', st.allowed_destinations INTO latin1, listed FROM settings st;
  IF (latin1 AND beyond_latin1(NEW.destination))
     OR (listed IS NOT NULL AND NOT address_or_reserved(NEW.destination)
         AND NOT plain_name_allowed(NEW.destination, listed)) THEN
    PERFORM check_inserted_row(NEW.destination, '{}');
  END IF;
  RETURN NEW;  -- the partition trigger checks addresses against allowed_address_prefixes
END
$$;

COMMENT ON FUNCTION messages_check_destination() IS
  'BEFORE INSERT row trigger of messages: a destination beyond Latin-1 while settings.destination_charset is '
  'latin1, or a plain one outside settings.allowed_destinations, fails with 23514 naming '
  'messages_destination_valid (through check_inserted_row). One look at settings per row; no function is '
  'called while the list is unset and the charset is any.';

REVOKE ALL ON FUNCTION beyond_latin1(text) FROM PUBLIC;
DO $$
BEGIN
  EXECUTE format('GRANT EXECUTE ON FUNCTION beyond_latin1(text) TO %I', current_schema() || '_dispatcher');
END
$$;
