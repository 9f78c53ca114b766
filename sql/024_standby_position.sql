-- 024_standby_position: how far the primary's WAL goes and how far a standby has flushed it, for a dispatcher that publishes only rows a standby already has.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 023, with the same outboxd.schema setting.
--
-- Why: with asynchronous replication a failover loses the transactions the
-- standby had not received. A dispatcher that published their rows has sent
-- messages whose rows, and the business state committed with them, are gone.
-- With database.wait_for_standby set, outboxd reads standby_position() after
-- each claim: every row the claim returned committed before the call, so its
-- commit record ends at or before wal_position; the claimed rows are
-- published once the standby's flushed position has passed it.
--
-- Least privilege: the flushed positions are in pg_stat_replication, whose
-- replication columns only roles holding pg_read_all_stats (or pg_monitor) may
-- read. Rather than grant the dispatcher that (it would also see every
-- session's queries), this function runs as its owner, the role that
-- migrated, and returns two positions and nothing else. The owner must be a
-- superuser or hold pg_read_all_stats; otherwise flushed is NULL and outboxd
-- holds the rows and says why.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regprocedure(format('%I.fire_scheduled(text, text, text)', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 023: apply 001_outbox.sql to 023 first', s
      USING ERRCODE = 'undefined_table';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

-- standby NULL: the most advanced standby that reports; else the standby
-- whose application_name it is. flushed is NULL when no such standby reports.
CREATE FUNCTION standby_position(standby text, OUT wal_position pg_lsn, OUT flushed pg_lsn)
LANGUAGE sql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
  SELECT pg_current_wal_insert_lsn(),
         (SELECT max(r.flush_lsn) FROM pg_stat_replication r
           WHERE standby IS NULL OR r.application_name = standby)
$$;

COMMENT ON FUNCTION standby_position(text) IS
  'The primary''s WAL insert position and how far the standby named (NULL: any) has flushed WAL; '
  'outboxd publishes a claimed row once flushed passes the position read after the claim '
  '(database.wait_for_standby). Runs as its owner, who must be able to read pg_stat_replication.';

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  EXECUTE format('REVOKE ALL ON FUNCTION %I.standby_position(text) FROM PUBLIC', s);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %I.standby_position(text) TO %I', s, s || '_dispatcher');
END
$$;
