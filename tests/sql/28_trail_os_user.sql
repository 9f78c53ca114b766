-- 027_trail_os_user: a writer's setting of outboxd.os_user never reaches the trail; an operator's name does.
--
-- Each statement runs in a fresh connection of run.sh's login role holding only
-- its group role (sqltest.try_as_member), as deployed.
SET search_path = public;
SELECT plan(5);

SELECT login_role AS dispatcher FROM sqltest.login_roles WHERE group_role = 'outbox_dispatcher' \gset
SELECT login_role AS writer FROM sqltest.login_roles WHERE group_role = 'outbox_writer' \gset

CREATE FUNCTION pg_temp.trail(message_id text) RETURNS text LANGUAGE sql AS $$
  SELECT string_agg(concat_ws('/', e.action, e.db_role, e.os_user), ', ' ORDER BY e.id)
    FROM outbox.row_events e WHERE e.message_id = trail.message_id
$$;

SELECT is(sqltest.try_as_member('outbox_writer',
    $$SELECT outbox.enqueue('orders', 'o-1', 'x', due_at => now() + interval '1 day')$$), 'ok', 'a writer''s row ...');
SELECT is(sqltest.try_as_member('outbox_writer',
    $$SELECT set_config('outboxd.os_user', 'console:alice', true); SELECT outbox.cancel('o-1')::text$$), 'ok',
  '... cancelled by its writer after naming an operator in outboxd.os_user ...');
SELECT is(pg_temp.trail('o-1'), 'cancelled/' || :'writer', '... records the writer''s login role and no OS user');

-- An operator's name still reaches the trail.
SELECT is(sqltest.try_as_member('outbox_writer', $$SELECT outbox.enqueue('orders', 'o-2', 'x')$$)
            || ' ' || sqltest.try_as_member('outbox_writer',
                                         $$SELECT set_config('outboxd.os_user', 'mallory', false)$$),
  'ok ok', 'another row ...');
UPDATE outbox.messages SET status = 'parked', last_error = 'test' WHERE message_id = 'o-2';
SELECT is(sqltest.try_as_member('outbox_dispatcher', $$SELECT outbox.requeue_parked('{o-2}', os_user => 'alice')$$)
            || ' ' || pg_temp.trail('o-2'),
  'ok parked/' || current_user || ', requeued/' || :'dispatcher' || '/alice',
  '... requeued by requeue_parked() as the dispatcher records the OS user it names');

SELECT * FROM finish();
