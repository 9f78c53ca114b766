-- 030_watchers: a watcher's row makes inserts NOTIFY, takes no share of the partitions, and goes as any instance's does.
--
-- The dispatcher's statements are the ones outboxd prepares, read from
-- docs/statements.sql (which ctest docs.statements holds to lib/pg) and run
-- in a dblink session of run.sh's dispatcher login, as deployed. What they
-- run commits: this file has its own database.
SET search_path = public;
SELECT plan(17);

SELECT login_role AS dispatcher FROM sqltest.login_roles WHERE group_role = 'outbox_dispatcher' \gset
SELECT login_role AS writer FROM sqltest.login_roles WHERE group_role = 'outbox_writer' \gset

-- Each statement as docs/statements.sql prints it: from its name to the blank line after it.
\set statements `echo "$OUTBOXD_SQLTEST_ROOT/docs/statements.sql"`
\set find '$0 == "-- " name {f = 1; next} f && /^$/ {exit} f'
\set balance `awk -v name=outboxd.outbox.balance :'find' :'statements'`
\set register `awk -v name=outboxd.outbox.register_instance :'find' :'statements'`
\set watch `awk -v name=outboxd.outbox.watch :'find' :'statements'`

SELECT dblink_connect('daemon', regexp_replace(sqltest.conninfo(), 'user=\S+$', 'user=' || :'dispatcher')) AS connected \gset
SELECT dblink_exec('daemon', 'PREPARE balance(text, bigint) AS ' || rtrim(:'balance', ';')) AS balance_prepared,
       dblink_exec('daemon', 'PREPARE register(text) AS ' || rtrim(:'register', ';')) AS register_prepared,
       dblink_exec('daemon', 'PREPARE watch(text) AS ' || rtrim(:'watch', ';')) AS watch_prepared \gset

-- Runs statement on the daemon's session; 'ok' or 'SQLSTATE: message'.
CREATE FUNCTION pg_temp.daemon(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  state text;
  message text;
BEGIN
  PERFORM dblink_exec('daemon', statement);
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
  RETURN state || ': ' || message;
END $$;

-- The partitions balance(instance) leases, and how many of them are over its share.
CREATE FUNCTION pg_temp.balance(instance text) RETURNS text LANGUAGE sql AS $$
  SELECT count(*) || ' leased, ' || count(*) FILTER (WHERE b.over_share) || ' over the share'
    FROM dblink('daemon', format('EXECUTE balance(%L, 15000)', instance)) AS b(partition int, over_share boolean, xact bigint)
$$;

CREATE FUNCTION pg_temp.instances() RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(string_agg(i.instance_id || ':' || i.idle || ':' || i.watching, ',' ORDER BY i.instance_id), '')
    FROM outbox.instances i
$$;

-- The column and who may write it -----------------------------------------------------

SELECT col_type_is('outbox', 'instances', 'watching', 'boolean', 'instances.watching is a boolean ...');
SELECT col_not_null('outbox', 'instances', 'watching', '... NOT NULL ...');
SELECT col_default_is('outbox', 'instances', 'watching', 'false', '... false unless set: an instance serves');
SELECT ok(has_column_privilege('outbox_dispatcher', 'outbox.instances', 'watching', 'INSERT')
          AND has_column_privilege('outbox_dispatcher', 'outbox.instances', 'watching', 'UPDATE')
          AND NOT has_column_privilege('outbox_writer', 'outbox.instances', 'watching', 'UPDATE'),
  'the dispatcher may insert and update watching, by column grant; writers may not');
SELECT is(pg_temp.daemon($$EXECUTE watch('w1')$$), 'ok', 'the dispatcher upserts a watcher''s row ...');
SELECT is(pg_temp.daemon($$EXECUTE watch('w1')$$) || ' ' || pg_temp.instances(), 'ok w1:true:true',
  '... again (its heartbeat): idle and watching');
SELECT is(pg_temp.daemon($$UPDATE outbox.instances SET started_at = now(), instance_id = 'w2' WHERE instance_id = 'w1'$$),
  '42501: permission denied for table instances', '... and changes no column beyond its grants');
SELECT is(sqltest.try_login(:'dispatcher', 'SET lock_timeout = ''2s''; LOCK TABLE outbox.instances IN SHARE ROW EXCLUSIVE MODE')
            || ' / ' || sqltest.try_login(:'dispatcher', 'DELETE FROM outbox.instances'),
  '42501: permission denied for table instances / 42501: permission denied for table instances',
  'the new grant gives it no LOCK above ACCESS SHARE and no DELETE');

-- Inserts NOTIFY while only a watcher's row is there ----------------------------------

SELECT dblink_connect('listener', sqltest.conninfo()) AS connected \gset
SELECT dblink_exec('listener', 'LISTEN outbox_wakeup') AS listening \gset
SELECT is(sqltest.try_login(:'writer', $$SELECT outbox.enqueue('orders', 'n-1', 'x')$$), 'ok', 'a writer enqueues ...');
SELECT pg_notify('outbox_wakeup', 's1') AS sentinel \gset
SELECT is(sqltest.notifications_until('listener', 'outbox_wakeup', 's1'), '{""}'::text[],
  '... and with only a watcher registered, its insert NOTIFYs outbox_wakeup once');

-- The share: watchers are not counted -------------------------------------------------

SELECT is(pg_temp.balance('a'), '64 leased, 0 over the share',
  'one instance beside a fresh watcher leases every partition, none over its share');
SELECT is(pg_temp.daemon($$EXECUTE register('b')$$) || ' ' || pg_temp.balance('a'), 'ok 64 leased, 32 over the share',
  'a second serving instance halves a''s share (the count the watcher stays out of)');
SELECT is(sqltest.ask_login(:'dispatcher', $$SELECT outbox.deregister_instance('b')::text$$) || ' ' || pg_temp.balance('a'),
  'true 64 leased, 0 over the share', 'once it has gone, a''s share is every partition again');

-- Serving again, and falling silent ---------------------------------------------------

SELECT is(pg_temp.daemon($$EXECUTE register('w1')$$) || ' ' || pg_temp.instances(), 'ok a:false:false,w1:false:false',
  'register_instance of a watcher''s id makes it a serving instance: no longer watching, nor idle');
SELECT is(pg_temp.daemon($$EXECUTE watch('w1')$$) || ' ' || pg_temp.instances(), 'ok a:false:false,w1:true:true',
  'watching again, it is a watcher again');
UPDATE outbox.instances SET heartbeat_at = now() - interval '1 hour' WHERE instance_id = 'w1';
SELECT is(sqltest.ask_login(:'dispatcher', $$SELECT outbox.forget_silent_instances('a', interval '10 minutes')::text$$)
            || ' ' || pg_temp.instances(), '1 a:false:false',
  'a silent watcher is forgotten as any silent instance');
SELECT is(pg_temp.daemon($$EXECUTE watch('w3')$$) || ' '
            || sqltest.ask_login(:'dispatcher', $$SELECT outbox.deregister_instance('w3')::text$$) || ' ' || pg_temp.instances(),
  'ok true a:false:false', 'a watcher leaves through deregister_instance() (unwatch)');

SELECT dblink_disconnect('listener') AS disconnected \gset
SELECT dblink_disconnect('daemon') AS disconnected \gset
SELECT * FROM finish();
