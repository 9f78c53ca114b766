-- 028_dispatcher_locks: the dispatcher holds no table privilege that lets it lock out writers or other dispatchers; its deletes go through functions.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 027, with the same outboxd.schema setting.
--
-- Why: LOCK TABLE in any mode above ROW EXCLUSIVE needs UPDATE, DELETE or
-- TRUNCATE on the whole table; column grants do not count. The dispatcher
-- held DELETE on messages, and INSERT, UPDATE and DELETE on leases and
-- instances, so its login could run LOCK TABLE messages IN ACCESS EXCLUSIVE
-- MODE and stall every writer (and every dispatcher) until it let go; the
-- same lock on instances stalls every writer too, since the insert trigger
-- reads it, and on leases every other dispatcher. What changes:
--   - messages: DELETE goes. The dispatcher keeps SELECT and UPDATE of the
--     columns it marks (022).
--   - leases: INSERT, UPDATE and DELETE go; UPDATE of owner, epoch,
--     acquired_at, renewed_at and expires_at, the columns balancing and
--     handing back write, comes back as column grants.
--   - instances: INSERT, UPDATE and DELETE go; INSERT of instance_id, idle and
--     heartbeat_at and UPDATE of started_at, heartbeat_at and idle, what the
--     registration and the idle flag write, come back as column grants.
--   - the daemon's deletes run as the schema's owner, through functions that
--     delete what its statements deleted, with the same row locks:
--     delete_accepted(ids, lease_owner) the accepted pending rows of a batch
--     (delete mode), fenced by the caller's unexpired leases as before;
--     purge_dispatched() and purge_cancelled() the oldest finished rows
--     (FOR UPDATE SKIP LOCKED, as before); deregister_instance() this
--     instance's registration; forget_silent_instances() the registrations
--     of instances silent for longer than the balancer allows, never the
--     caller's. None of them deletes a parked row, nor a pending row but
--     those of a batch named by the holder of their partitions' leases.
-- The dispatcher keeps SELECT on the three tables: ACCESS SHARE, which only
-- DDL waits for.
--
-- Cost: one function call per statement, as before one statement per batch;
-- the statements inside are the ones outboxd ran, planned once per session.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
BEGIN
  IF to_regprocedure(format('%I.messages_row_valid(%I.messages)', s, s)) IS NULL
     OR to_regprocedure(format('%I.purge_row_events(interval, int)', s)) IS NULL THEN
    RAISE EXCEPTION 'schema "%" is not at 027: apply 001_outbox.sql to 027 first', s
      USING ERRCODE = 'undefined_function';
  END IF;
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp', s), false);
END
$$;

-- ---------------------------------------------------------------------------
-- The daemon's deletes, as the owner
-- ---------------------------------------------------------------------------

-- The lease fence of every writing statement (lib/pg/outbox_sql.cpp, fence()):
-- both ARRAY(...) and the count are InitPlans, evaluated once per statement.
CREATE FUNCTION delete_accepted(ids bigint[], lease_owner text)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  deleted bigint;
BEGIN
  DELETE FROM messages m
   WHERE m.id = ANY (ids) AND m.status = 'pending'
     AND ((SELECT count(*) FILTER (WHERE f.owner = lease_owner AND f.expires_at > now()) = count(*) FROM leases f)
          OR m.partition = ANY (ARRAY(SELECT f.partition FROM leases f
                                       WHERE f.owner = lease_owner AND f.expires_at > now())));
  GET DIAGNOSTICS deleted = ROW_COUNT;
  RETURN deleted;
END
$$;

COMMENT ON FUNCTION delete_accepted(bigint[], text) IS
  'Retention delete_rows: deletes the rows ids that are still pending and whose partition lease_owner holds '
  'unexpired (the broker accepted them), and returns how many. Security definer: the dispatcher may not DELETE '
  '(that privilege would let it lock the table).';

CREATE FUNCTION purge_dispatched(older_than interval, batch_size int)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  purged bigint;
BEGIN
  -- messages_finished_idx, oldest first; SKIP LOCKED keeps two purgers apart.
  DELETE FROM messages WHERE id IN (
    SELECT f.id FROM messages f
     WHERE f.status = 'dispatched' AND f.dispatched_at < now() - older_than
     ORDER BY f.dispatched_at LIMIT batch_size FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS purged = ROW_COUNT;
  RETURN purged;
END
$$;

COMMENT ON FUNCTION purge_dispatched(interval, int) IS
  'Retention keep: deletes at most batch_size dispatched rows dispatched more than older_than ago, oldest '
  'first, skipping rows another transaction holds, and returns how many. Security definer: the dispatcher '
  'may not DELETE.';

CREATE FUNCTION purge_cancelled(older_than interval, batch_size int)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  purged bigint;
BEGIN
  DELETE FROM messages WHERE id IN (
    SELECT f.id FROM messages f
     WHERE f.status = 'cancelled' AND f.cancelled_at < now() - older_than
     ORDER BY f.cancelled_at LIMIT batch_size FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS purged = ROW_COUNT;
  RETURN purged;
END
$$;

COMMENT ON FUNCTION purge_cancelled(interval, int) IS
  'Retention of cancelled rows: deletes at most batch_size rows cancelled more than older_than ago, oldest '
  'first, skipping rows another transaction holds, and returns how many. Security definer: the dispatcher '
  'may not DELETE.';

CREATE FUNCTION deregister_instance(instance_id text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
  DELETE FROM instances i WHERE i.instance_id = deregister_instance.instance_id;
  RETURN FOUND;
END
$$;

COMMENT ON FUNCTION deregister_instance(text) IS
  'An outboxd instance that stops removes its registration: true, or false if there was none. Security '
  'definer: the dispatcher may not DELETE.';

CREATE FUNCTION forget_silent_instances(keep text, silent_for interval)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
  forgotten bigint;
BEGIN
  DELETE FROM instances i WHERE i.instance_id <> keep AND i.heartbeat_at < now() - silent_for;
  GET DIAGNOSTICS forgotten = ROW_COUNT;
  RETURN forgotten;
END
$$;

COMMENT ON FUNCTION forget_silent_instances(text, interval) IS
  'The balancer''s cleanup: removes the registrations of instances, other than keep, whose last heartbeat '
  'is more than silent_for old, and returns how many. Security definer: the dispatcher may not DELETE.';

-- ---------------------------------------------------------------------------
-- Grants
-- ---------------------------------------------------------------------------

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  dispatcher text := s || '_dispatcher';
BEGIN
  EXECUTE format('REVOKE ALL ON FUNCTION %1$I.delete_accepted(bigint[], text), %1$I.purge_dispatched(interval, int), '
                 '%1$I.purge_cancelled(interval, int), %1$I.deregister_instance(text), '
                 '%1$I.forget_silent_instances(text, interval) FROM PUBLIC', s);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.delete_accepted(bigint[], text), %1$I.purge_dispatched(interval, int), '
                 '%1$I.purge_cancelled(interval, int), %1$I.deregister_instance(text), '
                 '%1$I.forget_silent_instances(text, interval) TO %2$I', s, dispatcher);
  -- messages keeps its column UPDATE (022): revoking only DELETE leaves it.
  EXECUTE format('REVOKE DELETE ON %I.messages FROM %I', s, dispatcher);
  -- Revoking a table's INSERT or UPDATE revokes its column grants too: the lists below are the whole grant.
  EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON %I.leases, %I.instances FROM %I', s, s, dispatcher);
  EXECUTE format('GRANT UPDATE (owner, epoch, acquired_at, renewed_at, expires_at) ON %I.leases TO %I', s, dispatcher);
  EXECUTE format('GRANT INSERT (instance_id, idle, heartbeat_at), UPDATE (started_at, heartbeat_at, idle) '
                 'ON %I.instances TO %I', s, dispatcher);
END
$$;
