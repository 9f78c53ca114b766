-- 022_row_trail: what the dispatcher may change and delete, the events the database writes itself, fire_scheduled(), replay's NULL dry_run and the purge's cutoff.
--
-- Each statement runs in a fresh connection of run.sh's login role holding only
-- its group role (sqltest.try_as_member), as deployed; what it runs commits
-- (this file has its own database), so there is no transaction around the file.
SET search_path = public;
SELECT plan(47);

SELECT login_role AS dispatcher FROM sqltest.login_roles WHERE group_role = 'outbox_dispatcher' \gset
SELECT login_role AS writer FROM sqltest.login_roles WHERE group_role = 'outbox_writer' \gset

-- The refused statement's message, run as the dispatcher's login role.
CREATE FUNCTION pg_temp.refusal(command text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  message text;
BEGIN
  PERFORM dblink_connect('trail', sqltest.conninfo() || format(' user=%s',
    (SELECT l.login_role FROM sqltest.login_roles l WHERE l.group_role = 'outbox_dispatcher')));
  BEGIN
    PERFORM dblink_exec('trail', command);
  EXCEPTION WHEN OTHERS THEN
    message := SQLERRM;
  END;
  PERFORM dblink_disconnect('trail');
  RETURN message;
END
$$;

-- The events of a row: action, db_role, os_user.
CREATE FUNCTION pg_temp.trail(message_id text) RETURNS text LANGUAGE sql AS $$
  SELECT string_agg(concat_ws('/', e.action, e.db_role, e.os_user), ', ' ORDER BY e.id)
    FROM outbox.row_events e WHERE e.message_id = trail.message_id
$$;

SELECT outbox.enqueue('orders', 'm-1', 'x') AS m1 \gset
SELECT outbox.enqueue('orders', 'm-2', 'x') AS m2 \gset
SELECT outbox.enqueue('orders', 'k-1', 'x', session_id => 'k') AS k1 \gset
SELECT outbox.enqueue('orders', 'k-2', 'x', session_id => 'k') AS k2 \gset
SELECT outbox.enqueue('orders', 'x-1', 'x', session_id => 'x') AS x1 \gset
SELECT outbox.enqueue('orders', 'f-1', 'x', session_id => 'f', due_at => now() + interval '1 day') AS f1 \gset
SELECT outbox.enqueue('orders', 'y-1', 'x', session_id => 'y') AS y1 \gset
UPDATE outbox.messages SET status = 'parked', attempts = 10, last_error = 'rejected: bad' WHERE message_id = 'k-1';
UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() - interval '1 hour' WHERE message_id = 'x-1';
UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() - interval '2 days' WHERE message_id = 'y-1';
UPDATE outbox.leases SET owner = 'i1', expires_at = now() + interval '1 day';
DELETE FROM outbox.row_events;

-- What the dispatcher may UPDATE -----------------------------------------------------

SELECT is(ARRAY(SELECT a.attname::text FROM pg_attribute a
                  WHERE a.attrelid = 'outbox.messages'::regclass AND a.attnum > 0 AND NOT a.attisdropped
                    AND has_column_privilege('outbox_dispatcher', 'outbox.messages', a.attnum, 'UPDATE')
                  ORDER BY a.attname),
  '{attempts,dispatched_at,first_failed_at,last_error,last_failed_at,next_attempt_at,status}'::text[],
  'the dispatcher may UPDATE only the columns outboxd marks');
SELECT is_empty(format($$SELECT c FROM unnest('{body,headers,destination,writer,session_id,message_id,due_at,partition,
                                                created_at,cancelled_at,subject,ttl}'::text[]) c
                        WHERE sqltest.try_as_member('outbox_dispatcher',
                                format('UPDATE outbox.messages SET %%I = %%I WHERE id = %s', c, c)) <> '42501'$$, :m1),
  '... so it cannot forge a body, headers, destination or writer, nor reschedule a row (due_at)');
SELECT is((SELECT body FROM outbox.messages WHERE id = :m1), '\x78'::bytea, '... and the row is untouched');

-- The daemon's own marks -------------------------------------------------------------

SELECT is(sqltest.try_as_member('outbox_dispatcher',
    format($$UPDATE outbox.messages SET attempts = 1, next_attempt_at = now() + interval '1 minute',
                    last_error = 'released', first_failed_at = coalesce(first_failed_at, now()), last_failed_at = now()
              WHERE id = %s AND status = 'pending'$$, :m2)), 'ok',
  'the dispatcher records a failed attempt (pending -> pending) ...');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    format($$UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now(), next_attempt_at = NULL
              WHERE id = %s AND status = 'pending'$$, :m1)), 'ok',
  '... marks a row dispatched (pending -> dispatched) ...');
SELECT is(concat(pg_temp.trail('m-1'), pg_temp.trail('m-2')), '', '... neither of which writes an event');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    format($$UPDATE outbox.messages SET status = 'parked', attempts = 10, next_attempt_at = NULL, last_error = 'rejected: y'
              WHERE id = %s AND status = 'pending'$$, :k2)), 'ok',
  '... parks a row (pending -> parked) ...');
SELECT is(pg_temp.trail('k-2'), 'parked/' || :'dispatcher', '... which writes one parked event with its login role');
SELECT is(sqltest.ask_login(:'dispatcher', format($$SELECT outbox.delete_accepted('{%s}', 'i1')::text$$, :m2)), '1',
  '... deletes an accepted pending row (delete mode) ...');
SELECT is(sqltest.ask_login(:'dispatcher', $$SELECT outbox.purge_dispatched('1 day', 1000)::text$$), '1',
  '... and a dispatched one (purge)');

-- What only the schema's functions may change ----------------------------------------

SELECT is(sqltest.try_as_member('outbox_dispatcher',
    format($$UPDATE outbox.messages SET status = 'pending', attempts = 0 WHERE id = %s$$, :k1)), '42501',
  'the dispatcher cannot requeue a parked row by UPDATE');
SELECT matches(pg_temp.refusal(format($$UPDATE outbox.messages SET status = 'pending' WHERE id = %s$$, :k1)),
  'may not change the parked row k-1 to pending: use requeue_parked\(\)', '... the error names requeue_parked()');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    format($$UPDATE outbox.messages SET status = 'parked', last_error = 'forged' WHERE id = %s$$, :k1)), '42501',
  '... nor rewrite the last error of a parked row');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    format($$UPDATE outbox.messages SET status = 'pending', dispatched_at = NULL WHERE id = %s$$, :x1)), '42501',
  '... nor send a dispatched row again by UPDATE');
SELECT matches(pg_temp.refusal(format($$UPDATE outbox.messages SET status = 'pending', dispatched_at = NULL WHERE id = %s$$, :x1)),
  'use replay\(\)', '... the error names replay()');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    format($$UPDATE outbox.messages SET status = 'parked' WHERE id = %s$$, :x1)), '42501',
  '... nor park a dispatched row');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    format($$UPDATE outbox.messages SET status = 'cancelled', cancelled_at = now() WHERE id = %s$$, :f1)), '42501',
  '... nor cancel a pending row');
SELECT is(sqltest.try_as_member('outbox_dispatcher', format('DELETE FROM outbox.messages WHERE id = %s', :k1)), '42501',
  '... nor delete a parked row');
SELECT is(sqltest.try_as_member('outbox_dispatcher', format($$SELECT outbox.delete_accepted('{%s}', 'i1')$$, :k1)),
  'ok', '... directly or through delete_accepted(), which leaves it');
SELECT results_eq(format($$SELECT status, last_error FROM outbox.messages WHERE id IN (%s, %s) ORDER BY id$$, :k1, :x1),
  $$VALUES ('parked', 'rejected: bad'), ('dispatched', NULL)$$, '... and the rows are as they were');
SELECT is((SELECT count(*) FROM outbox.row_events WHERE message_id IN ('k-1', 'x-1', 'f-1')), 0::bigint,
  '... with no event');

-- The functions, each writing exactly one event with the login role -------------------

SELECT is(sqltest.try_as_member('outbox_dispatcher', $$SELECT outbox.requeue_parked('{k-1}', os_user => 'alice')$$), 'ok',
  'requeue_parked() as the dispatcher ...');
SELECT is(pg_temp.trail('k-1'), 'requeued/' || :'dispatcher' || '/alice', '... one requeued event: login role, os_user');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    format($$SELECT outbox.requeue_parked('{k-2}', os_user => 'alice');
             UPDATE outbox.messages SET status = 'parked', last_error = 'rejected: z' WHERE id = %s$$, :k2)), 'ok',
  'a requeue and a park in one transaction ...');
SELECT is(pg_temp.trail('k-2'), format('parked/%1$s, requeued/%1$s/alice, parked/%1$s', :'dispatcher'),
  '... the park is not the requeuer''s: os_user ends with the function');
SELECT is(sqltest.try_as_member('outbox_dispatcher', $$SELECT outbox.skip_parked('{k-2}', os_user => 'bob')$$), 'ok',
  'skip_parked() as the dispatcher ...');
SELECT results_eq($$SELECT action, db_role, os_user, detail FROM outbox.row_events WHERE message_id = 'k-2' AND action = 'skipped'$$,
  format($$VALUES ('skipped', %L::text, 'bob'::text, 'rejected: z'::text)$$, :'dispatcher'),
  '... one skipped event with the last error before it');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    $$SELECT count(*)::text FROM outbox.replay('{x-1}', NULL, NULL, NULL, NULL, 10, false, 'carol')$$), 'ok',
  'replay() as the dispatcher ...');
SELECT results_eq($$SELECT action, db_role, os_user, detail LIKE 'was dispatched at %, due at %'
                      FROM outbox.row_events WHERE message_id = 'x-1'$$,
  format($$VALUES ('replayed', %L::text, 'carol'::text, true)$$, :'dispatcher'), '... one replayed event');
SELECT is((SELECT status FROM outbox.messages WHERE id = :x1), 'pending', '... and the row is pending again');
SELECT is(sqltest.try_as_member('outbox_dispatcher', $$SELECT outbox.fire_scheduled('f-1', NULL, 'dave')$$), 'ok',
  'fire_scheduled() as the dispatcher ...');
SELECT results_eq($$SELECT e.action, e.db_role, e.os_user, e.detail LIKE 'was due at %', m.due_at <= now()
                      FROM outbox.row_events e JOIN outbox.messages m USING (message_id) WHERE e.message_id = 'f-1'$$,
  format($$VALUES ('fired', %L::text, 'dave'::text, true, true)$$, :'dispatcher'), '... one fired event, the row due now');
SELECT is(sqltest.try_as_member('outbox_dispatcher', $$SELECT outbox.fire_scheduled('f-1', NULL)$$), 'ok',
  'firing a row that is due already ...');
SELECT is((SELECT count(*) FROM outbox.row_events WHERE message_id = 'f-1'), 1::bigint, '... changes nothing');
SELECT is(sqltest.try_as_member('outbox_writer', $$SELECT outbox.fire_scheduled('f-1', NULL)$$), '42501',
  'writers may not fire rows');
SELECT is(sqltest.try_as_member('outbox_writer',
    $$SELECT outbox.enqueue('orders', 'c-1', 'x', due_at => now() + interval '1 day')$$), 'ok', 'a writer''s row ...');
SELECT is(sqltest.try_as_member('outbox_writer', $$SELECT outbox.cancel('c-1')::text$$), 'ok', '... cancel() by its writer ...');
SELECT is(pg_temp.trail('c-1'), 'cancelled/' || :'writer', '... one cancelled event with the writer''s login role');

-- The hot statements call no trigger function ------------------------------------------

BEGIN;
SET LOCAL track_functions = 'pl';
SELECT count(outbox.enqueue('orders', 'h-' || n, 'x')) AS hot FROM generate_series(1, 3) n \gset
UPDATE outbox.messages SET attempts = 1, next_attempt_at = now(), last_error = 'released' WHERE message_id = 'h-1';
UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() WHERE message_id = 'h-2';
DELETE FROM outbox.messages WHERE message_id = 'h-3';
SELECT is(coalesce(pg_stat_get_xact_function_calls(to_regprocedure('outbox.messages_guard()')), 0)
          + coalesce(pg_stat_get_xact_function_calls(to_regprocedure('outbox.record_status_change()')), 0), 0::bigint,
  'a retry, a mark and a delete of pending rows call neither the guard nor the event function');
UPDATE outbox.messages SET status = 'parked' WHERE message_id = 'h-1';
SELECT is(coalesce(pg_stat_get_xact_function_calls(to_regprocedure('outbox.messages_guard()')), 0), 0::bigint,
  'parking calls no guard ...');
SELECT is(pg_stat_get_xact_function_calls(to_regprocedure('outbox.record_status_change()')), 1::bigint,
  '... and the event function once');
COMMIT;

-- replay's NULL dry_run ---------------------------------------------------------------

UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() WHERE session_id = 'x';
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    $$SELECT count(*)::text FROM outbox.replay(NULL, NULL, 'orders', NULL, NULL, 1, NULL)$$), '22004',
  'replay with dry_run NULL is refused, not run past its limit');
SELECT is((SELECT status FROM outbox.messages WHERE id = :x1), 'dispatched', '... the row stays dispatched');

-- purge_row_events' cutoff ---------------------------------------------------------------

SELECT count(*) AS events FROM outbox.row_events \gset
SELECT is(sqltest.try_as_member('outbox_dispatcher', $$SELECT outbox.purge_row_events('-1 year 364 days', 1000)::text$$),
  '22023', 'a purge age that is a month less than a year back, cutting in the future, is refused');
SELECT is((SELECT count(*) FROM outbox.row_events), :events::bigint, '... and every event is kept');
SELECT is(sqltest.try_as_member('outbox_dispatcher', $$SELECT outbox.purge_row_events('1 hour', 1000)::text$$), 'ok',
  'an hour is enough');
SELECT is((SELECT count(*) FROM outbox.row_events), :events::bigint, '... and purges nothing younger');

SELECT * FROM finish();
