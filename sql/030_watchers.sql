-- 030_watchers: a daemon may watch an outbox it does not serve: registered so that inserts NOTIFY it, counted by no balancer.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 029, with the same outboxd.schema setting.
--
-- Why: one daemon serves many outboxes, and an outbox with nothing to do is
-- left dormant: no instance serves it and no lease of it is held, and the
-- daemon only waits for it to have work. The insert trigger NOTIFYs only
-- while some row of instances is idle (001, 026), so a dormant outbox needs
-- a registration that is idle; but every registered instance took a share of
-- the partitions (balance() in lib/pg/lease_store.cpp divides them by the
-- live instances), and a watcher that takes none would leave that share
-- unleased. What changes:
--   - instances.watching: the row is a watcher's. Its holder leases nothing
--     and the balancers leave it out of the share; its row stays idle, so
--     that inserts NOTIFY. An instance that registers to serve (outboxd's
--     register_instance) sets it false again.
--   - The dispatcher may write it (column grants, as 028: no table-level
--     privilege that would let it lock instances). A watcher leaves through
--     deregister_instance(), and one that falls silent is forgotten by
--     forget_silent_instances() as any instance is.
--
-- Cost: none per insert; the trigger reads idle as before. The column has a
-- constant default, so ALTER TABLE rewrites nothing: it holds instances'
-- ACCESS EXCLUSIVE lock, which inserts wait for (their trigger reads the
-- table), only for the moment it takes.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regprocedure(format('%I.require_one_writer(bigint[], text[], text, text)', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 029: apply 001_outbox.sql to 029 first', s
      USING ERRCODE = 'undefined_function';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

ALTER TABLE instances ADD COLUMN watching boolean NOT NULL DEFAULT false;

COMMENT ON COLUMN instances.watching IS
  'A daemon that serves this outbox only when woken: it holds no leases and takes no share; its row is idle '
  'so that inserts NOTIFY.';

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  EXECUTE format('GRANT INSERT (watching), UPDATE (watching) ON %I.instances TO %I', s, s || '_dispatcher');
END
$$;
