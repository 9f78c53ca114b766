-- Privileges of outbox_writer and outbox_dispatcher, each tried in a fresh connection of a login role holding only it.
--
-- Not SET ROLE inside this superuser connection: a plan cached here (with inlined
-- helpers, or a CHECK already planned as a superuser) would hide a missing
-- grant, as it hid that the dispatcher could not run the row CHECK's text_ok()
-- before 008. sqltest.try_as_member() opens a new connection of run.sh's login role
-- for every statement; what it runs commits (this file has its own database),
-- so there is no transaction around the file.
SET search_path = public;
SELECT plan(50);

SELECT outbox.enqueue('orders', 'other-app-1', 'secret') AS other_id \gset
SELECT workflow.start('wf-r', 'order', 'New') AS started \gset

SELECT ok(NOT rolcanlogin, format('%s is a NOLOGIN group role', rolname))
  FROM pg_roles WHERE rolname IN ('outbox_writer', 'outbox_dispatcher') ORDER BY rolname;
SELECT is((SELECT array_agg(l.group_role || ' <- ' || g.rolname ORDER BY l.group_role) FROM sqltest.login_roles l
             JOIN pg_roles r ON r.rolname = l.login_role
             JOIN pg_auth_members m ON m.member = r.oid
             JOIN pg_roles g ON g.oid = m.roleid),
  '{"outbox_dispatcher <- outbox_dispatcher","outbox_writer <- outbox_writer"}',
  'each login role holds its one group role and nothing else');

-- writer -----------------------------------------------------------------------

SELECT is(sqltest.try_as_member('outbox_writer', $$SELECT outbox.enqueue('orders', 'w-1', 'x')$$), 'ok', 'writer: enqueue (text)');
SELECT is(sqltest.try_as_member('outbox_writer', $$SELECT outbox.enqueue('orders', 'w-2', '{}'::jsonb)$$), 'ok', 'writer: enqueue (jsonb)');
SELECT is(sqltest.try_as_member('outbox_writer', $$SELECT outbox.enqueue('orders', 'w-3', '\x01'::bytea,
                                               due_at => clock_timestamp() + interval '1 hour')$$), 'ok', 'writer: enqueue (bytea, scheduled)');
SELECT is(sqltest.try_as_member('outbox_writer', $$SELECT outbox.enqueue('orders', 'w-1', 'y')$$), '23505',
  'writer: enqueue conflict still reports 23505');
SELECT is(sqltest.try_as_member('outbox_writer', $q$DO $d$ BEGIN IF NOT outbox.cancel('w-3') THEN RAISE 'not cancelled'; END IF; END $d$$q$),
  'ok', 'writer: cancel');
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'w-3'), 'cancelled', '... the row is cancelled');
SELECT is(sqltest.try_as_member('outbox_writer',
    $$INSERT INTO outbox.messages (message_id, destination, session_id, correlation_id, parent_message_id,
        originating_message_id, subject, content_type, headers, body, ttl, traceparent, due_at)
      VALUES ('w-4', 'orders', 's', 'c', 'p', 'o', 'Subject', 'text/plain', '{"a": 1}', 'b', '1 minute',
        '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', now())$$), 'ok',
  'writer: plain INSERT of every writer column (no sequence privilege needed for the identity)');
SELECT is((SELECT status || '/' || partition FROM outbox.messages WHERE message_id = 'w-4'),
  'pending/' || sqltest.partition_of('s', 64), '... status and partition derived');
SELECT is(sqltest.try_as_member('outbox_writer', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('w-4', 'orders') ON CONFLICT DO NOTHING$$),
  'ok', 'writer: INSERT ... ON CONFLICT DO NOTHING');
SELECT is(sqltest.try_as_member('outbox_writer', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('w-4', 'orders')
                                                ON CONFLICT (message_id, writer) DO NOTHING$$),
  '42501', 'writer: ON CONFLICT (message_id, writer) names columns it may not read');
SELECT is(sqltest.try_as_member('outbox_writer', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('w-1', 'orders') RETURNING id$$),
  '42501', 'writer: INSERT ... RETURNING needs SELECT, which the writer lacks');
SELECT is(sqltest.try_as_member('outbox_writer', $$INSERT INTO outbox.messages (message_id, destination, status) VALUES ('w-5', 'orders', 'dispatched')$$),
  '42501', 'writer: cannot set status on insert');
SELECT is(sqltest.try_as_member('outbox_writer', $$INSERT INTO outbox.messages (message_id, destination, partition) VALUES ('w-6', 'orders', 3)$$),
  '42501', 'writer: cannot set partition on insert');
SELECT is(sqltest.try_as_member('outbox_writer', $$INSERT INTO outbox.messages (message_id, destination, created_at) VALUES ('w-7', 'orders', now())$$),
  '42501', 'writer: cannot set created_at on insert');
SELECT is(sqltest.try_as_member('outbox_writer', 'SELECT count(*) FROM outbox.messages'), '42501', 'writer: cannot SELECT messages');
SELECT is(sqltest.try_as_member('outbox_writer', format('SELECT body FROM outbox.messages WHERE id = %s', :other_id)), '42501',
  'writer: cannot read another application''s row');
SELECT is(sqltest.try_as_member('outbox_writer', $$UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now()$$), '42501',
  'writer: cannot mark anything dispatched');
SELECT is(sqltest.try_as_member('outbox_writer', $$UPDATE outbox.messages SET status = 'pending' WHERE message_id = 'w-3'$$), '42501',
  'writer: cannot requeue');
SELECT is(sqltest.try_as_member('outbox_writer', 'DELETE FROM outbox.messages'), '42501', 'writer: cannot DELETE messages');
SELECT is(sqltest.try_as_member('outbox_writer', 'SELECT count(*) FROM outbox.leases'), '42501', 'writer: cannot read leases');
SELECT is(sqltest.try_as_member('outbox_writer', 'SELECT outbox.set_partition_count(2)'), '42501', 'writer: cannot change partitions');
SELECT is(sqltest.try_as_member('outbox_writer', 'CREATE TABLE outbox.mine (x int)'), '42501', 'writer: cannot CREATE in outbox');
SELECT is(sqltest.try_as_member('outbox_writer',
    $$SELECT row(workflow.start('wf-w', 'order', 'New', correlation_id => 'c', originating_message_id => 'o'),
                 workflow.save('wf-w', 1, 'Paid', '{"a": 1}'),
                 workflow.record_processed('wf-w', 'm-1'),
                 workflow.set_timeout('wf-w', 'wf-w:timeout:1', now() + interval '1 day', 'orders', '{}'::jsonb),
                 workflow.set_timeout('wf-w', 'wf-w:timeout:2', now() + interval '1 day', 'orders', 'text'),
                 workflow.clear_timeout('wf-w'),
                 workflow.record_compensation('wf-w', 'refund', 'wf-w:refund:1'),
                 workflow.set_compensation_status('wf-w', 'refund', 'failed', 'boom'),
                 workflow.purge_processed('1 day'))::text$$), 'ok',
  'writer: every workflow function, with valid arguments');
SELECT is(sqltest.try_as_member('outbox_writer', $$SELECT workflow.start(repeat('x', 200), 'k', 's')$$), '22023',
  'writer: validation errors name the field (22023), not a privilege error');
SELECT is(sqltest.try_as_member('outbox_writer',
    $$UPDATE workflow.instances SET data = '{"x": 1}' WHERE id = 'wf-r';
      SELECT count(*) FROM workflow.processed_messages; SELECT count(*) FROM workflow.compensations$$), 'ok',
  'writer: plain SELECT and UPDATE on workflow tables');
SELECT is(sqltest.try_as_member('outbox_writer', 'DELETE FROM workflow.processed_messages'), '42501',
  'writer: no DELETE (it would allow LOCK TABLE); workflow.remove() and the purges delete');
SELECT is(sqltest.try_as_member('outbox_writer', 'CREATE TABLE workflow.mine (x int)'), '42501', 'writer: cannot CREATE in workflow');

-- dispatcher -------------------------------------------------------------------
-- The row CHECK runs on every UPDATE, so each kind of UPDATE the daemon and the
-- CLI make is tried: mark (retention keep), a failed attempt, park, and requeue
-- and skip through their functions (a plain UPDATE of a parked row is refused).

SELECT is(sqltest.try_as_member('outbox_dispatcher',
    $$SELECT id FROM outbox.messages WHERE status = 'pending' AND due_at <= created_at ORDER BY id LIMIT 10$$), 'ok',
  'dispatcher: SELECT messages');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    format($$UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now(), next_attempt_at = NULL
             WHERE id = %s AND status = 'pending'$$, :other_id)), 'ok',
  'dispatcher: mark dispatched (retention keep)');
SELECT is((SELECT status FROM outbox.messages WHERE id = :other_id), 'dispatched', '... the row is dispatched');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    $$UPDATE outbox.messages SET attempts = 1, next_attempt_at = now() + interval '1 minute', last_error = 'rejected: x'
      WHERE message_id = 'w-2'$$), 'ok',
  'dispatcher: record a failed attempt');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    $$UPDATE outbox.messages SET status = 'parked', attempts = 10, next_attempt_at = NULL, last_error = 'rejected: y'
      WHERE message_id = 'w-2'$$), 'ok',
  'dispatcher: park');
SELECT is((SELECT status || '/' || attempts FROM outbox.messages WHERE message_id = 'w-2'), 'parked/10', '... the row is parked');
SELECT is(sqltest.try_as_member('outbox_dispatcher', $$SELECT outbox.requeue_parked('{w-2}')$$), 'ok',
  'dispatcher: requeue (the requeue trigger runs for it)');
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'w-2'), 'pending', '... the row is pending again');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    $$UPDATE outbox.messages SET status = 'parked' WHERE message_id = 'w-2';
      SELECT outbox.skip_parked('{w-2}')$$), 'ok',
  'dispatcher: skip');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    $$SELECT outbox.purge_dispatched('0', 1000) + outbox.purge_cancelled('0', 1000)$$), 'ok',
  'dispatcher: purge, through its functions');
SELECT is((SELECT count(*)::int FROM outbox.messages WHERE status IN ('dispatched', 'cancelled')), 0, '... the rows are gone');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    $$UPDATE outbox.leases SET owner = 'i1', epoch = epoch + 1, expires_at = now() + interval '15 s' WHERE partition = 0$$), 'ok',
  'dispatcher: take a lease');
SELECT is(sqltest.try_as_member('outbox_dispatcher',
    $$INSERT INTO outbox.instances (instance_id, idle) VALUES ('i1', true)
      ON CONFLICT (instance_id) DO UPDATE SET idle = EXCLUDED.idle, heartbeat_at = now();
      SELECT outbox.deregister_instance('i1')$$), 'ok',
  'dispatcher: register, mark idle, deregister');
SELECT is(sqltest.try_as_member('outbox_dispatcher', 'SELECT partition_count FROM outbox.settings'), 'ok', 'dispatcher: read settings');
SELECT is(sqltest.try_as_member('outbox_dispatcher', 'UPDATE outbox.settings SET partition_count = 2'), '42501',
  'dispatcher: cannot change settings');
SELECT is(sqltest.try_as_member('outbox_dispatcher', $$INSERT INTO outbox.messages (message_id, destination) VALUES ('d-1', 'x')$$),
  '42501', 'dispatcher: cannot INSERT messages');
SELECT is(sqltest.try_as_member('outbox_dispatcher', 'CREATE TABLE outbox.mine (x int)'), '42501', 'dispatcher: cannot CREATE TABLE in outbox');
SELECT is(sqltest.try_as_member('outbox_dispatcher', 'CREATE TABLE public.mine (x int)'), '42501', 'dispatcher: cannot CREATE TABLE in public');
SELECT is(sqltest.try_as_member('outbox_dispatcher', 'SELECT count(*) FROM workflow.instances'), '42501', 'dispatcher: no workflow access');
SELECT is(sqltest.try_as_member('outbox_dispatcher', $$SELECT outbox.enqueue('orders', 'd-2')$$), '42501', 'dispatcher: cannot enqueue');

SELECT * FROM finish();
