-- 003_roles: group roles <schema>_writer (applications) and <schema>_dispatcher (outboxd) with least privilege.
--
-- Both roles are NOLOGIN groups, created if missing (roles are cluster-wide,
-- so a second database reuses them); grant them to login roles:
--   CREATE ROLE orders_app LOGIN PASSWORD '...' IN ROLE outbox_writer;
--   CREATE ROLE outboxd LOGIN PASSWORD '...' IN ROLE outbox_dispatcher;
-- Creating a missing role needs CREATEROLE; a DBA may create them beforehand.
--
-- writer:     may enqueue and cancel, plain-INSERT the columns an application
--             supplies, and read and write workflow state; may not read outbox
--             rows, change them, or mark anything dispatched.
-- dispatcher: may read, mark and purge outbox rows and keep leases and
--             instances; no DDL, no workflow access.

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
BEGIN
  IF to_regclass(format('%I.messages', s)) IS NULL OR to_regclass(format('%I.instances', w)) IS NULL THEN
    RAISE EXCEPTION 'schemas "%" and "%" not found: apply 001_outbox.sql and 002_workflow.sql first', s, w
      USING ERRCODE = 'undefined_table';
  END IF;
  PERFORM set_config('search_path', format('%I, %I, pg_catalog, pg_temp', s, w), false);
END
$$;

DO $$
DECLARE
  s text := coalesce(nullif(current_setting('outboxd.schema', true), ''), 'outbox');
  w text := coalesce(nullif(current_setting('outboxd.workflow_schema', true), ''), 'workflow');
  writer text := s || '_writer';
  dispatcher text := s || '_dispatcher';
  role_name text;
BEGIN
  FOREACH role_name IN ARRAY ARRAY[writer, dispatcher] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = role_name) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
      EXCEPTION WHEN duplicate_object OR unique_violation THEN
        NULL;  -- created concurrently by a migration of another database
      END;
    END IF;
  END LOOP;
  EXECUTE format('COMMENT ON ROLE %I IS %L', writer,
    format('Applications writing to outbox %s and workflow %s (outboxd).', s, w));
  EXECUTE format('COMMENT ON ROLE %I IS %L', dispatcher,
    format('outboxd dispatchers of outbox %s.', s));

  -- Start from nothing, so that running this again on an older grant set converges.
  EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA %I, %I FROM PUBLIC, %I, %I', s, w, writer, dispatcher);
  EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I, %I FROM PUBLIC, %I, %I', s, w, writer, dispatcher);
  EXECUTE format('REVOKE ALL ON SCHEMA %I, %I FROM PUBLIC, %I, %I', s, w, writer, dispatcher);

  -- writer
  EXECUTE format('GRANT USAGE ON SCHEMA %I, %I TO %I', s, w, writer);
  EXECUTE format($g$
    GRANT INSERT (message_id, destination, session_id, correlation_id, parent_message_id,
                  originating_message_id, subject, content_type, headers, body, ttl,
                  traceparent, due_at)
    ON %I.messages TO %I $g$, s, writer);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.enqueue(text, text, bytea, text, text, text, text, text, text, jsonb, interval, text, timestamptz), '
                 '%1$I.enqueue(text, text, jsonb, text, text, text, text, text, text, jsonb, interval, text, timestamptz), '
                 '%1$I.enqueue(text, text, text, text, text, text, text, text, text, jsonb, interval, text, timestamptz), '
                 '%1$I.cancel(text), %1$I.require_text(text, text, int, boolean), %1$I.text_ok(text, int) TO %2$I',
                 s, writer);
  EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO %I', w, writer);
  EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA %I TO %I', w, writer);

  -- dispatcher
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', s, dispatcher);
  EXECUTE format('GRANT SELECT, UPDATE, DELETE ON %I.messages TO %I', s, dispatcher);
  EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I.leases, %I.instances TO %I', s, s, dispatcher);
  EXECUTE format('GRANT SELECT ON %I.settings TO %I', s, dispatcher);
  -- Written by outboxd migrate before the scripts run; lets the daemon check the version.
  IF to_regclass(format('%I.schema_migrations', s)) IS NOT NULL THEN
    EXECUTE format('GRANT SELECT ON %I.schema_migrations TO %I', s, dispatcher);
  END IF;
END
$$;
