-- 023_writer_rows: each writer's inbox entries and workflow state are its own: keyed by writer, behind row-level security, and no writer may lock these tables beyond ROW EXCLUSIVE.
--
-- Runs inside the caller's transaction (outboxd migrate, or psql -1), after
-- 001_outbox.sql to 021, with the same outboxd.schema and
-- outboxd.workflow_schema settings, and outboxd.legacy_writer when the inbox
-- or workflow tables hold rows.
--
-- Why: writers (applications) shared the inbox and the workflow tables with
-- table-wide SELECT, INSERT, UPDATE and DELETE. One application's
-- record_received('billing-svc', id) made another's first real delivery of
-- that id a duplicate, silently dropped; workflow.start() of an id another
-- application had taken returned false, and any writer could read, save,
-- update or delete another's state records. Table-level UPDATE or DELETE also
-- lets its holder LOCK TABLE ... IN ACCESS EXCLUSIVE MODE, which stalls every
-- other writer.
--
-- What changes, as messages.writer (009) did for the outbox rows:
--   - writer on outbox.received_messages and workflow.instances,
--     processed_messages and compensations: the login role (session_user)
--     that inserted the row, filled by the column's default; writers may not
--     insert or update it. Rows written before this migration belong to the
--     login role named by the setting outboxd.legacy_writer (outboxd migrate
--     --legacy-writer ROLE); with such rows and no role named, the migration
--     is refused (55000): rows of no writer would let an application start a
--     running workflow again or process a delivery twice. A DBA may assign
--     rows of other applications afterwards (docs/sql.md, Upgrading); the
--     workflow tables' foreign keys carry writer ON UPDATE CASCADE, so
--     assigning a state record assigns its processed ids and compensations.
--   - every key takes writer after its old columns: (id, writer),
--     (workflow_id, writer, message_id), (workflow_id, writer, step),
--     compensation (message_id, writer), inbox (consumer, message_id,
--     writer); constraint names stay, so start(), record_processed() and
--     record_received() are unchanged and now conflict only with the
--     caller's own rows. The purge indexes lead with writer.
--   - row-level security on the four tables: a role that does not bypass it
--     sees, updates and inserts only rows whose writer is its session_user.
--     The workflow functions and record_received() run as their caller, so
--     they act on the caller's rows; workflow_states() runs as the owner and
--     sees all, for outboxd timeline.
--   - writers keep SELECT, and INSERT and UPDATE on every column but writer:
--     column grants, which allow no LOCK mode above ROW EXCLUSIVE. DELETE
--     goes: purge_received() and purge_processed() become security definers
--     that delete only the caller's rows, and workflow.remove(id) deletes a
--     state record (and, by cascade, its processed ids and compensations).

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  IF to_regclass(format('%I.received_messages', s)) IS NULL OR to_regclass(format('%I.instances', w)) IS NULL THEN
    RAISE EXCEPTION 'tables "%".received_messages and "%".instances not found: apply 001_outbox.sql to 021 first', s, w
      USING ERRCODE = 'undefined_table';
  END IF;
  -- The workflow schema first, as for 002's functions; received_messages is found in the outbox schema.
  PERFORM set_config('search_path', format('%I, %I, pg_catalog, pg_temp', w, s), false);
END
$$;

-- ---------------------------------------------------------------------------
-- writer, keys, row-level security, grants
-- ---------------------------------------------------------------------------

ALTER TABLE processed_messages DROP CONSTRAINT processed_messages_workflow_id_fkey;
ALTER TABLE compensations DROP CONSTRAINT compensations_workflow_id_fkey;

DO $$
DECLARE
  writer_role text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox') || '_writer';
  legacy text := coalesce(current_setting('outboxd.legacy_writer', true), '');
  tables regclass[] := ARRAY['instances', 'processed_messages', 'compensations', 'received_messages']::regclass[];
  t regclass;
  columns text;
  found_rows boolean;
BEGIN
  FOREACH t IN ARRAY tables LOOP
    EXECUTE format('SELECT EXISTS (SELECT FROM %s)', t) INTO found_rows;
    IF found_rows AND legacy = '' THEN
      RAISE EXCEPTION '% holds rows written before each writer''s rows were its own: name the login role they belong to', t
        USING ERRCODE = 'object_not_in_prerequisite_state',
              HINT = 'outboxd migrate --legacy-writer ROLE (with psql, set outboxd.legacy_writer first); a DBA may '
                     'then assign other applications'' rows (docs/sql.md, Upgrading).';
    END IF;
  END LOOP;
  IF legacy <> '' AND NOT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = legacy) THEN
    RAISE EXCEPTION 'outboxd.legacy_writer names role "%", which does not exist', legacy USING ERRCODE = 'undefined_object';
  END IF;
  FOREACH t IN ARRAY tables LOOP
    -- Two steps, so that existing rows get the legacy writer rather than the migrating role.
    EXECUTE format('ALTER TABLE %s ADD COLUMN writer text NOT NULL DEFAULT %L', t, legacy);
    EXECUTE format('ALTER TABLE %s ALTER COLUMN writer SET DEFAULT session_user', t);
    EXECUTE format('COMMENT ON COLUMN %s.writer IS %L', t,
      'Login role (session_user) that inserted the row; writers see and change only their own rows (row-level '
      'security). Rows written before 023_writer_rows.sql got outboxd.legacy_writer.');
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('CREATE POLICY own_rows ON %s USING (writer = session_user) WITH CHECK (writer = session_user)', t);

    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO columns
      FROM pg_attribute a
     WHERE a.attrelid = t AND a.attnum > 0 AND NOT a.attisdropped AND a.attname <> 'writer';
    -- Revoking the table's privileges revokes its column privileges too: start from nothing.
    EXECUTE format('REVOKE ALL ON %s FROM %I', t, writer_role);
    EXECUTE format('GRANT SELECT, INSERT (%2$s), UPDATE (%2$s) ON %1$s TO %3$I', t, columns, writer_role);
  END LOOP;
END
$$;

COMMENT ON POLICY own_rows ON instances IS 'A writer''s state records are its own: writer = session_user.';
COMMENT ON POLICY own_rows ON processed_messages IS 'A writer''s processed ids are its own: writer = session_user.';
COMMENT ON POLICY own_rows ON compensations IS 'A writer''s compensations are its own: writer = session_user.';
COMMENT ON POLICY own_rows ON received_messages IS 'A writer''s inbox entries are its own: writer = session_user.';

ALTER TABLE instances DROP CONSTRAINT instances_pkey, ADD CONSTRAINT instances_pkey PRIMARY KEY (id, writer);
ALTER TABLE processed_messages
  DROP CONSTRAINT processed_messages_pkey,
  ADD CONSTRAINT processed_messages_pkey PRIMARY KEY (workflow_id, writer, message_id),
  ADD CONSTRAINT processed_messages_workflow_id_fkey FOREIGN KEY (workflow_id, writer)
    REFERENCES instances (id, writer) ON UPDATE CASCADE ON DELETE CASCADE;
ALTER TABLE compensations
  DROP CONSTRAINT compensations_pkey,
  DROP CONSTRAINT compensations_message_id_key,
  ADD CONSTRAINT compensations_pkey PRIMARY KEY (workflow_id, writer, step),
  ADD CONSTRAINT compensations_message_id_key UNIQUE (message_id, writer),
  ADD CONSTRAINT compensations_workflow_id_fkey FOREIGN KEY (workflow_id, writer)
    REFERENCES instances (id, writer) ON UPDATE CASCADE ON DELETE CASCADE;
ALTER TABLE received_messages
  DROP CONSTRAINT received_messages_pkey,
  ADD CONSTRAINT received_messages_pkey PRIMARY KEY (consumer, message_id, writer);

-- The purges walk one writer's oldest rows.
DROP INDEX processed_messages_processed_at_idx;
CREATE INDEX processed_messages_processed_at_idx ON processed_messages (writer, processed_at);
DROP INDEX received_messages_received_at_idx;
CREATE INDEX received_messages_received_at_idx ON received_messages (writer, received_at);

-- ---------------------------------------------------------------------------
-- Deletes, through functions that see only the caller's rows
-- ---------------------------------------------------------------------------

CREATE FUNCTION remove(id text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
  DELETE FROM instances i WHERE i.id = remove.id AND i.writer = session_user;
  RETURN FOUND;
END
$$;

COMMENT ON FUNCTION remove(text) IS
  'Deletes the caller''s (writer = session_user) state record id with its processed ids and compensations, '
  'in the caller''s transaction, and returns true; false if the caller has no such workflow. '
  'Security definer: writers may not DELETE (that privilege would let them lock the table).';

CREATE OR REPLACE FUNCTION purge_processed(older_than interval, batch_size int DEFAULT 1000)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
  RETURN purge_own_rows('processed_messages', 'processed_at', older_than, batch_size);
END
$$;

COMMENT ON FUNCTION purge_processed(interval, int) IS
  'Retention of processed message ids: deletes at most batch_size of the caller''s (writer = session_user) '
  'records processed more than older_than ago, oldest first, and returns how many. Call it repeatedly (each '
  'call in its own short transaction) until it returns less than batch_size. Security definer: writers may not DELETE.';

DO $$
BEGIN
  PERFORM set_config('search_path', format('%I, pg_catalog, pg_temp',
    coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox')), false);
END
$$;

CREATE FUNCTION purge_own_rows(rows regclass, stamp name, older_than interval, batch_size int)
RETURNS int
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
  -- A timestamp, compared as one: '-1 year 364 days' is more than 0 as an
  -- interval (a month counts 30 days) but cuts a day into the future.
  cutoff timestamptz := now() - older_than;
  purged int;
BEGIN
  IF cutoff IS NULL OR cutoff > now() THEN
    RAISE EXCEPTION 'older_than must not reach into the future' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF batch_size IS NULL OR batch_size NOT BETWEEN 1 AND 100000 THEN
    RAISE EXCEPTION 'batch_size must be 1..100000' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- The victims are locked (SKIP LOCKED: a concurrent purge takes others),
  -- so their ctid cannot change before the delete in the same statement.
  EXECUTE format('WITH victims AS (SELECT r.ctid FROM %1$s r WHERE r.writer = session_user AND r.%2$I < $1 '
                 'ORDER BY r.%2$I LIMIT $2 FOR UPDATE SKIP LOCKED) '
                 'DELETE FROM %1$s r USING victims v WHERE r.ctid = v.ctid', rows, stamp)
    USING cutoff, batch_size;
  GET DIAGNOSTICS purged = ROW_COUNT;
  RETURN purged;
END
$$;

COMMENT ON FUNCTION purge_own_rows(regclass, name, interval, int) IS
  'Internal, for purge_received() and purge_processed(), which run it as the owner: deletes at most batch_size '
  'rows of the table whose writer is session_user and whose column stamp is older than older_than, oldest '
  'first; 22023 unless now() - older_than is not in the future and batch_size is 1..100000.';

CREATE OR REPLACE FUNCTION purge_received(older_than interval, batch_size int DEFAULT 1000)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
  RETURN purge_own_rows('received_messages', 'received_at', older_than, batch_size);
END
$$;

COMMENT ON FUNCTION purge_received(interval, int) IS
  'Retention of the inbox: deletes at most batch_size of the caller''s (writer = session_user) ids received '
  'more than older_than ago, oldest first, and returns how many. Call it repeatedly (each call in its own short '
  'transaction) until it returns less than batch_size. Security definer: writers may not DELETE.';

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  EXECUTE format('REVOKE ALL ON FUNCTION %1$I.remove(text), %2$I.purge_own_rows(regclass, name, interval, int) '
                 'FROM PUBLIC', w, s);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %I.remove(text) TO %I', w, s || '_writer');
END
$$;
