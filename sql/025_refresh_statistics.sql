-- 025_refresh_statistics: the dispatcher may have the outbox's planner statistics refreshed, and nothing more.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 024, with the same outboxd.schema setting.
--
-- Why: outboxd's statements use generic plans made from the planner's
-- statistics of the messages table. A bulk committed into an outbox that the
-- statistics still count as empty (a drained table, ANALYZEd or VACUUMed
-- while it was) is read with plans made for an empty table: they walk the
-- wrong index, over every row of the bulk, once per claim (1.3 s per claim
-- at 200,000 rows), until autovacuum's next ANALYZE, which for a bulk comes
-- too late. When a pass has read more rows than the statistics say the table
-- holds, outboxd calls refresh_statistics(): an ANALYZE of the messages
-- table, which also makes PostgreSQL plan its prepared statements again.
--
-- Least privilege: only the table's owner (or a superuser) may ANALYZE it.
-- This function runs as its owner, the role that migrated, takes no argument
-- and analyzes that one table, so the dispatcher gains no other power.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regprocedure(format('%I.standby_position(text)', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 024: apply 001_outbox.sql to 024 first', s
      USING ERRCODE = 'undefined_table';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

CREATE FUNCTION refresh_statistics() RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
  ANALYZE messages;
END
$$;

COMMENT ON FUNCTION refresh_statistics() IS
  'ANALYZE of the messages table, as its owner: outboxd calls it when a pass has read more rows than the '
  'planner''s statistics say the table holds, so that its plans are made for the rows there are.';

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  EXECUTE format('REVOKE ALL ON FUNCTION %I.refresh_statistics() FROM PUBLIC', s);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %I.refresh_statistics() TO %I', s, s || '_dispatcher');
END
$$;
