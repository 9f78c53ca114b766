-- Test helpers installed once into the template database (schema sqltest), next to pgTAP and dblink.

CREATE SCHEMA sqltest;

-- Runs command as role_name and returns 'ok' or the SQLSTATE it raised. pgTAP
-- keeps its state in temp tables of the session user, so assertions cannot run
-- under SET ROLE themselves; they check what this returns instead.
CREATE FUNCTION sqltest.try_as(role_name text, command text)
RETURNS text
LANGUAGE plpgsql
AS $$
BEGIN
  BEGIN
    EXECUTE format('SET LOCAL ROLE %I', role_name);
    EXECUTE command;
    RESET ROLE;
    RETURN 'ok';
  EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;  -- the subtransaction rollback also undoes SET ROLE
  END;
END
$$;

-- The login roles run.sh made for this run, each holding only its group role.
CREATE TABLE sqltest.login_roles (group_role text PRIMARY KEY, login_role text NOT NULL);

-- Runs command in a new connection of the login role that holds only group_role
-- and returns 'ok' or the SQLSTATE it raised. A fresh connection, not SET ROLE
-- here: nothing planned or cached by a more privileged role can hide a missing
-- grant. The command commits; if it returns rows, they have one column.
CREATE FUNCTION sqltest.try_as_member(group_role text, command text)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  login text := (SELECT l.login_role FROM sqltest.login_roles l WHERE l.group_role = try_as_member.group_role);
  outcome text := 'ok';
BEGIN
  IF login IS NULL THEN
    RAISE EXCEPTION 'no login role for %: run the file through tests/sql/run.sh', group_role;
  END IF;
  -- A later keyword wins in a conninfo string.
  PERFORM dblink_connect('sqltest_member', sqltest.conninfo() || format(' user=%s', login));
  BEGIN
    PERFORM * FROM dblink('sqltest_member', command) AS t(r text);
  EXCEPTION WHEN OTHERS THEN
    outcome := SQLSTATE;  -- dblink raises the remote error's SQLSTATE
  END;
  PERFORM dblink_disconnect('sqltest_member');
  RETURN outcome;
END
$$;

-- The plan of query, one line per row, without costs.
CREATE FUNCTION sqltest.explain(query text)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  line text;
  plan text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
    plan := plan || line || E'\n';
  END LOOP;
  RETURN plan;
END
$$;

-- A dblink connection string to this database as the current user, through
-- the server's own socket (or its TCP address when it has no socket).
CREATE FUNCTION sqltest.conninfo()
RETURNS text
LANGUAGE sql
AS $$
  SELECT format('host=%s port=%s dbname=%s user=%s',
                coalesce(nullif(trim(split_part(current_setting('unix_socket_directories'), ',', 1)), ''),
                         host(inet_server_addr()), '127.0.0.1'),
                current_setting('port'), current_database(), session_user)
$$;

-- Payloads of the notifications on channel that reach dblink connection conn
-- before one with payload sentinel; raises if the sentinel does not come
-- within timeout. Notifications from one session arrive in commit order, so
-- sending the sentinel after the statement under test makes "nothing arrived"
-- a definite answer.
CREATE FUNCTION sqltest.notifications_until(conn text, channel text, sentinel text,
                                            timeout interval DEFAULT '10 seconds')
RETURNS text[]
LANGUAGE plpgsql
AS $$
DECLARE
  deadline timestamptz := clock_timestamp() + timeout;
  received text[] := '{}';
  n record;
BEGIN
  LOOP
    FOR n IN SELECT * FROM dblink_get_notify(conn) LOOP
      IF n.notify_name = channel THEN
        IF n.extra = sentinel THEN
          RETURN received;
        END IF;
        received := received || n.extra;
      END IF;
    END LOOP;
    IF clock_timestamp() > deadline THEN
      RAISE EXCEPTION 'sentinel % did not arrive on channel % within %', sentinel, channel, timeout;
    END IF;
    PERFORM pg_sleep(0.01);
  END LOOP;
END
$$;

-- Waits until backend pid is blocked by a lock; false after timeout.
CREATE FUNCTION sqltest.wait_until_blocked(pid int, timeout interval DEFAULT '10 seconds')
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
  deadline timestamptz := clock_timestamp() + timeout;
BEGIN
  WHILE clock_timestamp() < deadline LOOP
    IF cardinality(pg_blocking_pids(pid)) > 0 THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN false;
END
$$;

-- The partition a row hashes to, as messages_set_partition() computes it.
CREATE FUNCTION sqltest.partition_of(key text, n int)
RETURNS int
LANGUAGE sql IMMUTABLE
AS $$
  SELECT ((hashtext(key)::bigint & 2147483647) % n)::int
$$;

-- A login role of group outbox_writer, created if missing (roles are
-- cluster-wide and stay). Call it outside the test's transaction: dblink
-- sessions see only committed roles.
CREATE FUNCTION sqltest.writer_login(role_name text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = role_name) THEN
    EXECUTE format('CREATE ROLE %I LOGIN IN ROLE outbox_writer', role_name);
  END IF;
END
$$;

-- Runs command in a fresh connection of login role role_name (its own
-- transaction, committed) and returns 'ok', or the SQLSTATE and message it
-- raised with the DETAIL if any: 'SQLSTATE: message [detail]'.
CREATE FUNCTION sqltest.try_login(role_name text, command text)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  state text;
  message text;
  detail text;
BEGIN
  PERFORM dblink_connect('login', regexp_replace(sqltest.conninfo(), 'user=\S+$', 'user=' || role_name));
  BEGIN
    -- In a DO block: dblink_exec refuses statements that return rows.
    PERFORM dblink_exec('login', format('DO %L', format('BEGIN EXECUTE %L; END', command)));
    PERFORM dblink_disconnect('login');
    RETURN 'ok';
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
    PERFORM dblink_disconnect('login');
    RETURN state || ': ' || message || coalesce(nullif(' [' || detail || ']', ' []'), '');
  END;
END
$$;

-- The value of query (one row, one column, as text) in a fresh connection of login role role_name.
CREATE FUNCTION sqltest.ask_login(role_name text, query text)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  answer text;
BEGIN
  PERFORM dblink_connect('login', regexp_replace(sqltest.conninfo(), 'user=\S+$', 'user=' || role_name));
  SELECT t.a INTO answer FROM dblink('login', query) AS t(a text);
  PERFORM dblink_disconnect('login');
  RETURN answer;
END
$$;
