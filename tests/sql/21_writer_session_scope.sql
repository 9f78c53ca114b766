-- 019_writer_session_scope: a session is its writer's; replay() counts the rows waiting behind a row in its writer's session only, and a session several writers use needs the writer (029).
BEGIN;
SET search_path = public;
SELECT plan(6);

-- Session o7 as three writers wrote it: app_a, app_b, and a row from before 009 (no writer).
SELECT outbox.enqueue('orders', 'w-1', 'x', session_id => 'o7') AS w1 \gset
SELECT outbox.enqueue('orders', 'w-2', 'x', session_id => 'o7') AS w2 \gset
SELECT outbox.enqueue('orders', 'w-3', 'x', session_id => 'o7') AS w3 \gset
SELECT outbox.enqueue('orders', 'w-4', 'x', session_id => 'o7') AS w4 \gset
SELECT outbox.enqueue('orders', 'w-5', 'x', session_id => 'o7') AS w5 \gset
UPDATE outbox.messages SET writer = CASE WHEN message_id IN ('w-1', 'w-2', 'w-5') THEN 'app_a'
                                         WHEN message_id = 'w-3' THEN 'app_b' END
 WHERE session_id = 'o7';
UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() - interval '1 hour'
 WHERE message_id IN ('w-1', 'w-4');

SELECT throws_ok($$SELECT * FROM outbox.replay(NULL, 'o7', NULL, NULL, NULL, 10, true)$$, '21000',
  'session "o7" names rows of more than one writer', 'a session id that several writers use needs the writer');
SELECT results_eq($$SELECT message_id, row_session, matched, waiting_behind
                      FROM outbox.replay(NULL, 'o7', NULL, NULL, NULL, 10, true, writer => 'app_a')$$,
  $$VALUES ('w-1', 'o7', 1::bigint, 2::bigint)$$,
  'replay counts the pending rows after each row of its own writer only: app_a''s w-2 and w-5');
SELECT results_eq($$SELECT message_id, row_session, matched, waiting_behind
                      FROM outbox.replay(NULL, 'o7', NULL, NULL, NULL, 10, true, writer => '')$$,
  $$VALUES ('w-4', 'o7', 1::bigint, 0::bigint)$$, '... none for the writerless w-4, named by writer ''''');
SELECT is((SELECT count(*) FROM outbox.replay(NULL, 'o7', NULL, NULL, NULL, 10, false, writer => 'app_a')), 1::bigint,
  'a replay by session id and writer takes that writer''s rows ...');
SELECT results_eq($$SELECT message_id, status FROM outbox.messages WHERE session_id = 'o7' ORDER BY id$$,
  $$VALUES ('w-1', 'pending'), ('w-2', 'pending'), ('w-3', 'pending'), ('w-4', 'dispatched'), ('w-5', 'pending')$$,
  '... and makes them pending again, no other writer''s');

SELECT alike(col_description('outbox.messages'::regclass,
                             (SELECT attnum FROM pg_attribute WHERE attrelid = 'outbox.messages'::regclass
                                 AND attname = 'session_id')),
  '%by one writer%', 'the column says whose order a session is');

SELECT * FROM finish();
ROLLBACK;
