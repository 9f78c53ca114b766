-- Timeouts: set_timeout/clear_timeout write or cancel the scheduled outbox row in the same transaction as the state.
BEGIN;
SET search_path = public;
SELECT plan(36);

SELECT workflow.start('order-7', 'order-fulfilment', 'AwaitingPayment',
                      correlation_id => 'corr-7', originating_message_id => 'orders:order-placed:7') AS started \gset

-- Rolled back: neither the outbox row nor the state change remains.
SAVEPOINT before_timeout;
SELECT workflow.set_timeout('order-7', 'order-7:payment-timeout:1', now() + interval '1 day', 'orders',
                            '{"timeoutId": "order-7:payment-timeout:1"}'::jsonb,
                            subject => 'PaymentDeadlineExpired', parent_message_id => 'orders:order-placed:7',
                            headers => '{"tenant": "acme"}') AS first_id \gset
SELECT is((SELECT id FROM outbox.messages WHERE message_id = 'order-7:payment-timeout:1'), :first_id::bigint,
  'set_timeout returns the id of the outbox row');
SELECT results_eq($$
  SELECT destination, session_id, correlation_id, parent_message_id, originating_message_id, subject, content_type,
         headers, convert_from(body, 'UTF8') COLLATE "default", due_at, status, due_at > created_at
    FROM outbox.messages WHERE message_id = 'order-7:payment-timeout:1'$$,
  $$VALUES ('orders', 'order-7', 'corr-7', 'orders:order-placed:7', 'orders:order-placed:7', 'PaymentDeadlineExpired',
            'application/json', '{"tenant": "acme"}'::jsonb, '{"timeoutId": "order-7:payment-timeout:1"}',
            now() + interval '1 day', 'pending', true)$$,
  '... a scheduled row with session, correlation and origin from the state record');
SELECT results_eq($$SELECT timeout_message_id, timeout_due_at, version FROM workflow.instances WHERE id = 'order-7'$$,
  $$VALUES ('order-7:payment-timeout:1', now() + interval '1 day', 1::bigint)$$,
  '... the state records the timeout, version unchanged');
ROLLBACK TO SAVEPOINT before_timeout;
SELECT is((SELECT count(*) FROM outbox.messages WHERE message_id = 'order-7:payment-timeout:1'), 0::bigint,
  'rollback removes the outbox row ...');
SELECT is((SELECT timeout_message_id FROM workflow.instances WHERE id = 'order-7'), NULL, '... and the state change');

-- A transition: save plus timeout, committed together (here: kept).
SELECT is(workflow.save('order-7', 1, 'AwaitingPayment', '{"reservationId": "r-1"}'), 2::bigint, 'save in the transition');
SELECT workflow.set_timeout('order-7', 'order-7:payment-timeout:1', now() + interval '1 day', 'orders',
                            '{"timeoutId": "order-7:payment-timeout:1"}'::jsonb) AS t1 \gset
SELECT is(workflow.set_timeout('order-7', 'order-7:payment-timeout:1', now() + interval '1 day', 'orders',
                               '{"timeoutId": "order-7:payment-timeout:1"}'::jsonb), :t1::bigint,
  'setting the same timeout again returns the same row');
SELECT is((SELECT count(*) FROM outbox.messages WHERE message_id LIKE 'order-7:%'), 1::bigint, '... and adds none');
SAVEPOINT before_move;
SELECT is(workflow.set_timeout('order-7', 'order-7:payment-timeout:1', now() + interval '2 days', 'orders',
                               '{"timeoutId": "order-7:payment-timeout:1"}'::jsonb), :t1::bigint,
  'the same timeout id with another due time moves the row (reschedule)');
ROLLBACK TO SAVEPOINT before_move;
SELECT throws_ok($$SELECT workflow.set_timeout('order-7', 'order-7:payment-timeout:1', now() + interval '2 days', 'orders',
                                                '{"timeoutId": "changed"}'::jsonb)$$,
  '23505', NULL, 'the same timeout id with another body: 23505');

-- Replacing the timeout cancels the old row.
SAVEPOINT before_replace;
SELECT workflow.set_timeout('order-7', 'order-7:payment-timeout:2', now() + interval '2 days', 'orders',
                            'text body') AS t2 \gset
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'order-7:payment-timeout:1'), 'cancelled',
  'a new timeout id cancels the previous timeout''s row');
SELECT results_eq($$SELECT status, body, content_type FROM outbox.messages WHERE message_id = 'order-7:payment-timeout:2'$$,
  $$VALUES ('pending', convert_to('text body', 'UTF8'), NULL::text)$$, '... the new row is pending (untyped body: text)');
SELECT results_eq($$SELECT timeout_message_id, timeout_due_at FROM workflow.instances WHERE id = 'order-7'$$,
  $$VALUES ('order-7:payment-timeout:2', now() + interval '2 days')$$, '... and the state names the new one');
ROLLBACK TO SAVEPOINT before_replace;
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'order-7:payment-timeout:1'), 'pending',
  'rollback un-cancels the previous row ...');
SELECT is((SELECT count(*) FROM outbox.messages WHERE message_id = 'order-7:payment-timeout:2'), 0::bigint,
  '... removes the new one ...');
SELECT is((SELECT timeout_message_id FROM workflow.instances WHERE id = 'order-7'), 'order-7:payment-timeout:1',
  '... and restores the state');

-- clear_timeout
SAVEPOINT before_clear;
SELECT is(workflow.clear_timeout('order-7'), true, 'clear_timeout cancels a future timeout: true');
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'order-7:payment-timeout:1'), 'cancelled', '... row cancelled');
SELECT results_eq($$SELECT timeout_message_id, timeout_due_at, version FROM workflow.instances WHERE id = 'order-7'$$,
  $$VALUES (NULL::text, NULL::timestamptz, 2::bigint)$$, '... state cleared, version unchanged');
SELECT is(workflow.clear_timeout('order-7'), false, 'clear_timeout with no timeout set: false');
ROLLBACK TO SAVEPOINT before_clear;
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'order-7:payment-timeout:1'), 'pending',
  'rollback of clear_timeout: the row is pending again ...');
SELECT is((SELECT timeout_message_id FROM workflow.instances WHERE id = 'order-7'), 'order-7:payment-timeout:1',
  '... and the state still names it');

-- A timeout that is already due cannot be cancelled; the state is cleared anyway.
SELECT workflow.start('order-8', 'order-fulfilment', 'AwaitingPayment') AS s8,
       workflow.set_timeout('order-8', 'order-8:payment-timeout:1', clock_timestamp() + interval '50 milliseconds',
                            'orders', '\x00'::bytea) AS t8,
       pg_sleep(0.1) AS slept \gset
SELECT is(workflow.clear_timeout('order-8'), false, 'clear_timeout of a due timeout: false (it will arrive)');
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'order-8:payment-timeout:1'), 'pending',
  '... the row stays pending');
SELECT is((SELECT timeout_message_id FROM workflow.instances WHERE id = 'order-8'), NULL,
  '... the state no longer names it, so its handler finds it stale');
SELECT workflow.set_timeout('order-8', 'order-8:payment-timeout:2', clock_timestamp() + interval '1 hour', 'orders',
                            '\x00'::bytea) AS t8b \gset
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'order-8:payment-timeout:1'), 'pending',
  'a new timeout does not touch a previous one no longer recorded');

-- A cancelled timeout id stays cancelled: re-arming needs a new ordinal.
SELECT workflow.set_timeout('order-8', 'order-8:payment-timeout:3', clock_timestamp() + interval '1 hour', 'orders',
                            '\x00'::bytea) AS t8c \gset
SELECT is((SELECT status FROM outbox.messages WHERE message_id = 'order-8:payment-timeout:2'), 'cancelled',
  'timeout 2 was cancelled by timeout 3');

-- Overloads and errors
SELECT lives_ok($$SELECT workflow.set_timeout(workflow_id => 'order-8', message_id => 'order-8:reminder:1',
                                             due_at => now() + interval '1 hour', destination => 'reminders',
                                             body => 'bytes'::bytea, content_type => 'application/octet-stream')$$,
  'named parameters with a bytea body');
SELECT is((SELECT content_type FROM outbox.messages WHERE message_id = 'order-8:reminder:1'), 'application/octet-stream',
  '... content_type passed through');
SELECT lives_ok($$SELECT workflow.set_timeout('order-8', 'order-8:reminder:2', now() + interval '1 hour', 'reminders')$$,
  'without a body');
SELECT throws_ok($$SELECT workflow.set_timeout('no-such-workflow', 'x:1', now() + interval '1 hour', 'orders')$$,
  'P0002', 'workflow "no-such-workflow" does not exist', 'set_timeout of a missing workflow');
SELECT throws_ok($$SELECT workflow.set_timeout('order-8', 'x:2', NULL, 'orders')$$, '22023', 'due_at is required',
  'set_timeout without due_at');
SELECT throws_ok($$SELECT workflow.clear_timeout('no-such-workflow')$$, 'P0002', 'workflow "no-such-workflow" does not exist',
  'clear_timeout of a missing workflow');
SELECT throws_ok(format('SELECT workflow.set_timeout(%L, %L, now() + interval %L, %L)', 'order-8', repeat('t', 129), '1 hour', 'orders'),
  '22023', 'message_id must be 1..128 characters without control characters', 'set_timeout validates the id');
SELECT is((SELECT timeout_message_id FROM workflow.instances WHERE id = 'order-8'), 'order-8:reminder:2',
  'failed calls left the last timeout recorded');
SELECT results_eq($$SELECT message_id, status FROM outbox.messages WHERE session_id = 'order-8' ORDER BY id$$,
  $$VALUES ('order-8:payment-timeout:1', 'pending'), ('order-8:payment-timeout:2', 'cancelled'),
           ('order-8:payment-timeout:3', 'cancelled'), ('order-8:reminder:1', 'cancelled'), ('order-8:reminder:2', 'pending')$$,
  'one timeout per workflow: each set_timeout cancelled the one before, except the one already due');

SELECT * FROM finish();
ROLLBACK;
