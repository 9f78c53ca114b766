-- 028_dispatcher_locks: the dispatcher cannot lock messages, leases or instances beyond ACCESS SHARE; its deletes go through functions that delete what its statements deleted.
--
-- Each statement runs in a fresh connection of run.sh's login role holding only
-- its group role (sqltest.try_login, sqltest.try_as_member, sqltest.ask_login),
-- as deployed; what it runs commits (this file has its own database).
SET search_path = public;
SELECT plan(25);

SELECT login_role AS dispatcher FROM sqltest.login_roles WHERE group_role = 'outbox_dispatcher' \gset

-- No lock that stalls writers or other dispatchers -----------------------------------

SELECT is(sqltest.try_login(:'dispatcher', 'SET lock_timeout = ''2s''; LOCK TABLE outbox.messages IN ACCESS EXCLUSIVE MODE'),
  '42501: permission denied for table messages', 'the dispatcher cannot LOCK messages IN ACCESS EXCLUSIVE MODE');
SELECT is_empty(format($$
  SELECT t, mode, answer FROM unnest('{outbox.messages,outbox.leases,outbox.instances}'::text[]) t,
         unnest('{ROW SHARE,ROW EXCLUSIVE,SHARE UPDATE EXCLUSIVE,SHARE,SHARE ROW EXCLUSIVE,EXCLUSIVE,ACCESS EXCLUSIVE}'::text[]) mode,
         sqltest.try_login(%L, format('SET lock_timeout = ''2s''; LOCK TABLE %%s IN %%s MODE', t, mode)) answer
   WHERE answer NOT LIKE '42501: permission denied for table %%'$$, :'dispatcher'),
  '... nor messages, leases or instances in any mode above ACCESS SHARE (SHARE and EXCLUSIVE among them)');
SELECT is(sqltest.try_login(:'dispatcher', 'LOCK TABLE outbox.messages, outbox.leases, outbox.instances IN ACCESS SHARE MODE'),
  'ok', '... ACCESS SHARE stays (SELECT)');
SELECT is_empty($$
  SELECT t, p FROM unnest('{outbox.messages,outbox.leases,outbox.instances}'::text[]) t,
         unnest('{INSERT,UPDATE,DELETE,TRUNCATE}'::text[]) p
   WHERE has_table_privilege('outbox_dispatcher', t, p)$$,
  'the dispatcher holds no table-wide INSERT, UPDATE, DELETE or TRUNCATE on them');
SELECT is(sqltest.try_as_member('outbox_dispatcher', 'DELETE FROM outbox.messages WHERE false')
            || ' ' || sqltest.try_as_member('outbox_dispatcher', 'DELETE FROM outbox.leases WHERE false')
            || ' ' || sqltest.try_as_member('outbox_dispatcher', 'DELETE FROM outbox.instances WHERE false')
            || ' ' || sqltest.try_as_member('outbox_dispatcher', 'INSERT INTO outbox.leases (partition) VALUES (999)')
            || ' ' || sqltest.try_as_member('outbox_dispatcher', 'UPDATE outbox.leases SET partition = partition WHERE false'),
  '42501 42501 42501 42501 42501', '... so it cannot DELETE from them, add a lease or renumber one');
SELECT is_empty($$
  SELECT f, r FROM unnest(ARRAY['outbox.delete_accepted(bigint[], text)', 'outbox.purge_dispatched(interval, int)',
                                'outbox.purge_cancelled(interval, int)', 'outbox.deregister_instance(text)',
                                'outbox.forget_silent_instances(text, interval)']) f,
         unnest('{outbox_writer,public}'::text[]) r
   WHERE has_function_privilege(r, f, 'EXECUTE') OR NOT has_function_privilege('outbox_dispatcher', f, 'EXECUTE')$$,
  'the delete functions are the dispatcher''s alone');

-- The rows ------------------------------------------------------------------------

SELECT outbox.enqueue('orders', 'a-1', 'x') AS a1 \gset
SELECT outbox.enqueue('orders', 'a-2', 'x') AS a2 \gset
SELECT outbox.enqueue('orders', 'w-1', 'x') AS w1 \gset
SELECT outbox.enqueue('orders', 'k-1', 'x') AS k1 \gset
SELECT outbox.enqueue('orders', 'd-1', 'x') AS d1 \gset
SELECT outbox.enqueue('orders', 'd-2', 'x') AS d2 \gset
SELECT outbox.enqueue('orders', 'd-3', 'x') AS d3 \gset
SELECT outbox.enqueue('orders', 'c-1', 'x') AS c1 \gset
SELECT outbox.enqueue('orders', 'c-2', 'x') AS c2 \gset
UPDATE outbox.messages SET status = 'parked', attempts = 10, last_error = 'rejected: bad' WHERE id = :k1;
UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() - interval '3 days' WHERE id = :d1;
UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() - interval '2 days' WHERE id = :d2;
UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() WHERE id = :d3;
UPDATE outbox.messages SET status = 'cancelled', cancelled_at = now() - interval '2 days' WHERE id = :c1;
UPDATE outbox.messages SET status = 'cancelled', cancelled_at = now() WHERE id = :c2;
UPDATE outbox.leases SET owner = 'i1', epoch = epoch + 1, expires_at = now() + interval '1 day';

CREATE FUNCTION pg_temp.left_of(ids bigint[]) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(string_agg(m.message_id, ',' ORDER BY m.message_id), '') FROM outbox.messages m WHERE m.id = ANY (ids)
$$;

-- Called after what precedes it in an expression, unlike a subquery (an InitPlan, evaluated first).
CREATE FUNCTION pg_temp.instances() RETURNS text LANGUAGE sql AS $$
  SELECT string_agg(i.instance_id, ',' ORDER BY i.instance_id) FROM outbox.instances i
$$;

-- delete mode: the accepted rows of a batch, behind the lease fence -----------------

SELECT is(sqltest.ask_login(:'dispatcher', format($$SELECT outbox.delete_accepted('{%s,%s,%s,%s}', 'i1')::text$$,
                                                  :a1, :a2, :k1, :d3)), '2',
  'delete_accepted() deletes the pending rows of the batch ...');
SELECT is(pg_temp.left_of(ARRAY[:a1, :a2, :k1, :d3, :w1]::bigint[]), 'd-3,k-1,w-1',
  '... never a parked or dispatched one, nor a row outside the batch');
SELECT is(sqltest.ask_login(:'dispatcher', format($$SELECT outbox.delete_accepted('{%s}', 'i2')::text$$, :w1)), '0',
  'a writer''s pending row is not deleted for an instance that holds no lease of its partition ...');
UPDATE outbox.leases SET expires_at = now() - interval '1 second';
SELECT is(sqltest.ask_login(:'dispatcher', format($$SELECT outbox.delete_accepted('{%s}', 'i1')::text$$, :w1)), '0',
  '... nor for one whose lease has expired');
SELECT is(sqltest.ask_login(:'dispatcher', $$SELECT outbox.delete_accepted('{}', 'i1')::text$$), '0',
  '... and an empty batch deletes nothing');
UPDATE outbox.leases SET expires_at = now() + interval '1 day';
SELECT is(sqltest.ask_login(:'dispatcher',
    format($$SELECT d.n || ' ' || (pg_current_xact_id_if_assigned() IS NOT NULL)
               FROM outbox.delete_accepted('{%s}', 'i1') AS d(n)$$, :a1)), '0 false',
  'the statement outboxd runs: the count, and no transaction id when nothing was deleted');

-- Retention: the oldest finished rows, skipping locked ones --------------------------

SELECT is(sqltest.ask_login(:'dispatcher', $$SELECT outbox.purge_dispatched('1 day', 1)::text$$), '1',
  'purge_dispatched() deletes at most batch_size rows ...');
SELECT is(pg_temp.left_of(ARRAY[:d1, :d2, :d3]::bigint[]), 'd-2,d-3', '... the oldest first');
SELECT dblink_connect('holder', sqltest.conninfo()) AS connected \gset
SELECT dblink_exec('holder', 'BEGIN') AS began \gset
SELECT count(*) AS held FROM dblink('holder', format('SELECT id FROM outbox.messages WHERE id IN (%s, %s) FOR UPDATE', :d2, :c1))
  AS t(id bigint) \gset
SELECT is(sqltest.ask_login(:'dispatcher', $$SET lock_timeout = '2s'; SELECT outbox.purge_dispatched('1 day', 10)::text$$), '0',
  '... skipping a row another transaction holds, without waiting');
SELECT is(sqltest.ask_login(:'dispatcher', $$SET lock_timeout = '2s'; SELECT outbox.purge_cancelled('1 day', 10)::text$$), '0',
  'purge_cancelled() skips it too');
SELECT dblink_exec('holder', 'ROLLBACK') AS ended \gset
SELECT dblink_disconnect('holder') AS disconnected \gset
SELECT is(sqltest.ask_login(:'dispatcher', $$SELECT outbox.purge_dispatched('1 day', 10)::text$$)
            || ' ' || sqltest.ask_login(:'dispatcher', $$SELECT outbox.purge_cancelled('1 day', 10)::text$$), '1 1',
  'once let go, each purge deletes its row older than the cutoff ...');
SELECT is(pg_temp.left_of(ARRAY[:d2, :d3, :c1, :c2]::bigint[]), 'c-2,d-3', '... and keeps the younger ones');
SELECT is(sqltest.ask_login(:'dispatcher', $$SELECT outbox.purge_dispatched('-1 day', 1000)::text$$)
            || ' ' || sqltest.ask_login(:'dispatcher', $$SELECT outbox.purge_cancelled('-1 day', 1000)::text$$)
            || ' ' || pg_temp.left_of(ARRAY[:w1, :k1]::bigint[]),
  '1 1 k-1,w-1', 'no purge deletes a pending or a parked row, whatever its cutoff');

-- The instances: registration, idle flag, deregistration, the balancer's cleanup ---

SELECT is(sqltest.try_as_member('outbox_dispatcher',
    $$INSERT INTO outbox.instances (instance_id) VALUES ('i1')
      ON CONFLICT (instance_id) DO UPDATE SET started_at = now(), heartbeat_at = now(), idle = false;
      INSERT INTO outbox.instances (instance_id, idle, heartbeat_at) VALUES ('i1', true, now())
      ON CONFLICT (instance_id) DO UPDATE SET idle = EXCLUDED.idle, heartbeat_at = now();
      INSERT INTO outbox.instances (instance_id) VALUES ('i2'), ('i3')$$), 'ok',
  'the dispatcher registers instances and sets their idle flag (register_instance, set_idle)');
UPDATE outbox.instances SET heartbeat_at = now() - interval '1 hour' WHERE instance_id IN ('i1', 'i3');
SELECT is(sqltest.ask_login(:'dispatcher',
    $$WITH beat AS (INSERT INTO outbox.instances (instance_id) SELECT 'i1' FROM outbox.forget_silent_instances('i1', interval '10 minutes')
                    ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = now())
      SELECT string_agg(instance_id, ',' ORDER BY instance_id) FROM outbox.instances$$), 'i1,i2,i3',
  'the balancer''s beat, as outboxd runs it ...');
SELECT is(pg_temp.instances(), 'i1,i2',
  '... forgets an instance silent for longer than it allows, never the caller nor a live one');
SELECT is(sqltest.ask_login(:'dispatcher', $$SELECT outbox.deregister_instance('i1')::text$$)
            || ' ' || sqltest.ask_login(:'dispatcher', $$SELECT outbox.deregister_instance('i9')::text$$)
            || ' ' || pg_temp.instances(),
  'true false i2', 'deregister_instance() removes that one instance');

-- The leases: balancing and handing back, by column grants -------------------------

SELECT is(sqltest.try_as_member('outbox_dispatcher',
    $$WITH free AS (SELECT partition FROM outbox.leases WHERE owner IS DISTINCT FROM 'i2' ORDER BY partition LIMIT 2
                    FOR UPDATE SKIP LOCKED)
      UPDATE outbox.leases l SET epoch = l.epoch + 1, acquired_at = now(), owner = 'i2', renewed_at = now(),
                                 expires_at = now() + interval '15 s'
       WHERE l.partition IN (SELECT partition FROM free);
      UPDATE outbox.leases SET owner = NULL, expires_at = NULL WHERE owner = 'i2' AND partition = ANY ('{0}')$$), 'ok',
  'the dispatcher takes, renews and hands back leases (balance, hand_back)');
SELECT is((SELECT string_agg(partition || ':' || coalesce(owner, '-'), ',' ORDER BY partition) FROM outbox.leases
            WHERE partition < 3), '0:-,1:i2,2:i1', '... and the leases say so');

SELECT * FROM finish();
