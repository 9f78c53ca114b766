-- Workflow state: start, save with an expected version, processed message ids and their purge, compensations.
BEGIN;
SET search_path = public;
SELECT plan(56);

-- start -------------------------------------------------------------------------

SELECT is(workflow.start('order-42', 'order-fulfilment', 'AwaitingInventory',
                         correlation_id => '71db97f2a3f54b72b0d73c665ce86fd7',
                         originating_message_id => 'orders:order-placed:42',
                         data => '{"orderId": "order-42", "amount": 249}'), true, 'start: true for a new workflow');
SELECT results_eq($$SELECT kind, status, version, correlation_id, originating_message_id, timeout_message_id,
                           timeout_due_at, data, created_at, updated_at FROM workflow.instances WHERE id = 'order-42'$$,
  $$VALUES ('order-fulfilment', 'AwaitingInventory', 1::bigint, '71db97f2a3f54b72b0d73c665ce86fd7',
            'orders:order-placed:42', NULL::text, NULL::timestamptz, '{"orderId": "order-42", "amount": 249}'::jsonb,
            now(), now())$$,
  '... the state record at version 1');
SELECT is(workflow.start('order-42', 'other-kind', 'Other', data => '{"x": 1}'), false, 'start again: false');
SELECT results_eq($$SELECT kind, status, version, data FROM workflow.instances WHERE id = 'order-42'$$,
  $$VALUES ('order-fulfilment', 'AwaitingInventory', 1::bigint, '{"orderId": "order-42", "amount": 249}'::jsonb)$$,
  '... and nothing changed');
SELECT is(workflow.start('order-43', 'order-fulfilment', 'New'), true, 'start with defaults');
SELECT is((SELECT data FROM workflow.instances WHERE id = 'order-43'), '{}'::jsonb, '... data defaults to {}');

SELECT throws_ok(format('SELECT workflow.start(%L, %L, %L)', repeat('w', 129), 'k', 's'),
  '22023', 'id must be 1..128 characters without control characters', '129-character workflow id');
SELECT throws_ok($$SELECT workflow.start(E'wf\n1', 'k', 's')$$,
  '22023', 'id must be 1..128 characters without control characters', 'workflow id with a control character');
SELECT throws_ok($$SELECT workflow.start('', 'k', 's')$$,
  '22023', 'id must be 1..128 characters without control characters', 'empty workflow id');
SELECT throws_ok($$SELECT workflow.start('wf-x', NULL, 's')$$, '22023', 'kind is required', 'kind is required');
SELECT throws_ok($$SELECT workflow.start('wf-x', 'k', 's', correlation_id => E'\x01')$$,
  '22023', 'correlation_id must be 1..128 characters without control characters', 'correlation_id validated');
SELECT throws_ok($$SELECT workflow.start('wf-x', 'k', 's', data => '[]')$$, '22023', 'data must be a JSON object',
  'data must be an object');
SELECT throws_ok($$INSERT INTO workflow.instances (id, kind, status) VALUES (repeat('w', 129), 'k', 's')$$,
  '23514', 'new row for relation "instances" violates check constraint "instances_id_valid"',
  'the CHECK constraint guards direct inserts');
SELECT throws_ok($$INSERT INTO workflow.instances (id, kind, status) VALUES ('wf-c1', E'k\x01', 's')$$,
  '23514', 'new row for relation "instances" violates check constraint "instances_kind_valid"', 'kind with a control character');
SELECT throws_ok($$INSERT INTO workflow.instances (id, kind, status) VALUES ('wf-c2', 'k', '')$$,
  '23514', 'new row for relation "instances" violates check constraint "instances_status_valid"', 'empty status');
SELECT throws_ok($$INSERT INTO workflow.instances (id, kind, status, version) VALUES ('wf-c3', 'k', 's', 0)$$,
  '23514', 'new row for relation "instances" violates check constraint "instances_version_valid"', 'version 0');
SELECT throws_ok($$INSERT INTO workflow.instances (id, kind, status, originating_message_id) VALUES ('wf-c4', 'k', 's', '')$$,
  '23514', 'new row for relation "instances" violates check constraint "instances_originating_message_id_valid"',
  'empty originating_message_id');
SELECT throws_ok($$INSERT INTO workflow.instances (id, kind, status, timeout_message_id) VALUES ('wf-c5', 'k', 's', 't-1')$$,
  '23514', 'new row for relation "instances" violates check constraint "instances_timeout_complete"',
  'a timeout id without its due time');
SELECT throws_ok($$INSERT INTO workflow.instances (id, kind, status, data) VALUES ('wf-c6', 'k', 's', '1')$$,
  '23514', 'new row for relation "instances" violates check constraint "instances_data_object"', 'data not an object');

-- save --------------------------------------------------------------------------

SELECT is(workflow.save('order-42', 1, 'AwaitingPayment', '{"orderId": "order-42", "reservationId": "r-9001"}'), 2::bigint,
  'save at the expected version returns the new version');
SELECT results_eq($$SELECT status, version, data FROM workflow.instances WHERE id = 'order-42'$$,
  $$VALUES ('AwaitingPayment', 2::bigint, '{"orderId": "order-42", "reservationId": "r-9001"}'::jsonb)$$,
  '... status and data replaced');
SELECT is(workflow.save('order-42', 2, 'Paid'), 3::bigint, 'save without data');
SELECT is((SELECT data ->> 'reservationId' FROM workflow.instances WHERE id = 'order-42'), 'r-9001', '... keeps data');
SELECT is(workflow.save('order-42', 3, NULL, '{"done": true}'), 4::bigint, 'save with status NULL');
SELECT is((SELECT status FROM workflow.instances WHERE id = 'order-42'), 'Paid', '... keeps status');
SELECT throws_ok($$SELECT workflow.save('order-42', 1, 'Shipped')$$,
  '40001', 'workflow "order-42" is at version 4, not 1: reload and retry', 'a stale version: 40001');
SELECT throws_ok($$SELECT workflow.save('order-42', 5, 'Shipped')$$,
  '40001', 'workflow "order-42" is at version 4, not 5: reload and retry', 'a version from the future: 40001');
SELECT throws_ok($$SELECT workflow.save('no-such-workflow', 1, 'Shipped')$$,
  '40001', 'workflow "no-such-workflow" does not exist: reload and retry', 'a missing workflow: 40001');
SELECT is((SELECT version FROM workflow.instances WHERE id = 'order-42'), 4::bigint, 'failed saves changed nothing');
SELECT throws_ok($$SELECT workflow.save('order-42', 4, 'S', '"not an object"')$$, '22023', 'data must be a JSON object',
  'save validates data');

UPDATE workflow.instances SET updated_at = now() - interval '1 day' WHERE id = 'order-43';
UPDATE workflow.instances SET data = '{"direct": true}' WHERE id = 'order-43';
SELECT is((SELECT updated_at FROM workflow.instances WHERE id = 'order-43'), now(), 'a direct UPDATE also sets updated_at');

-- processed messages --------------------------------------------------------------

SELECT is(workflow.record_processed('order-42', 'payments:payment-captured:42'), true, 'record_processed: true the first time');
SELECT is(workflow.record_processed('order-42', 'payments:payment-captured:42'), false, '... false for a duplicate');
SELECT is(workflow.record_processed('order-43', 'payments:payment-captured:42'), true, '... per workflow');
SELECT throws_ok($$SELECT workflow.record_processed('no-such-workflow', 'm-1')$$,
  '23503', 'workflow "no-such-workflow" does not exist', 'record_processed for a missing workflow');
SELECT throws_ok(format('SELECT workflow.record_processed(%L, %L)', 'order-42', repeat('m', 129)),
  '22023', 'message_id must be 1..128 characters without control characters', 'record_processed validates the id');

INSERT INTO workflow.processed_messages (workflow_id, message_id, processed_at)
SELECT 'order-42', 'old-' || i, now() - interval '30 days' + i * interval '1 minute' FROM generate_series(1, 5) i;
SELECT is(workflow.purge_processed('7 days', 2), 2, 'purge_processed deletes one batch');
SELECT is(workflow.purge_processed('7 days', 2), 2, '... and the next');
SELECT is(workflow.purge_processed('7 days', 2), 1, '... and the rest');
SELECT is(workflow.purge_processed('7 days', 2), 0, '... then nothing');
SELECT is((SELECT count(*) FROM workflow.processed_messages), 2::bigint, 'recent ids are kept');
SELECT throws_ok($$SELECT workflow.purge_processed('-1 day')$$, '22023', 'older_than must not reach into the future',
  'negative retention');

-- compensations ---------------------------------------------------------------------

SELECT is(workflow.record_compensation('order-42', 'release-inventory', 'order-42:release-inventory:1'), true,
  'record_compensation: true for a new step');
SELECT is(workflow.record_compensation('order-42', 'release-inventory', 'order-42:release-inventory:1'), false,
  '... false for the same message id (a replayed transition)');
SELECT is(workflow.set_compensation_status('order-42', 'release-inventory', 'failed', 'warehouse unavailable'), true,
  'set_compensation_status: failed with an error');
SELECT is(workflow.record_compensation('order-42', 'release-inventory', 'order-42:release-inventory:2'), true,
  're-issuing with the next ordinal: true');
SELECT results_eq($$SELECT message_id, status, attempts, last_error FROM workflow.compensations
                     WHERE workflow_id = 'order-42' AND step = 'release-inventory'$$,
  $$VALUES ('order-42:release-inventory:2', 'pending', 2, NULL::text)$$,
  '... new id, pending again, attempts 2, error cleared');
SELECT is(workflow.set_compensation_status('order-42', 'release-inventory', 'completed'), true, 'completed');
SELECT is(workflow.record_compensation('order-42', 'release-inventory', 'order-42:release-inventory:3'), false,
  'a completed step is not issued again');
SELECT is(workflow.set_compensation_status('order-42', 'refund-payment', 'completed'), false,
  'set_compensation_status of an unknown step: false');
SELECT throws_ok($$SELECT workflow.set_compensation_status('order-42', 'release-inventory', 'done')$$,
  '22023', 'status must be pending, completed or failed', 'an unknown compensation status');
SELECT throws_ok($$SELECT workflow.record_compensation('order-43', 'refund-payment', 'order-42:release-inventory:2')$$,
  '23505', NULL, 'a compensation message id belongs to one step');
SELECT throws_ok($$INSERT INTO workflow.compensations (workflow_id, step, message_id) VALUES ('order-42', '', 'c-1')$$,
  '23514', 'new row for relation "compensations" violates check constraint "compensations_step_valid"',
  'the CHECK guards direct inserts: empty step');
SELECT throws_ok($$UPDATE workflow.compensations SET status = 'done' WHERE workflow_id = 'order-42'$$,
  '23514', 'new row for relation "compensations" violates check constraint "compensations_status_valid"',
  '... and updates: unknown status');
SELECT throws_ok($$UPDATE workflow.compensations SET attempts = 0 WHERE workflow_id = 'order-42'$$,
  '23514', 'new row for relation "compensations" violates check constraint "compensations_attempts_valid"',
  '... attempts 0');

DELETE FROM workflow.instances WHERE id = 'order-42';
SELECT is((SELECT count(*) FROM workflow.processed_messages WHERE workflow_id = 'order-42')
        + (SELECT count(*) FROM workflow.compensations WHERE workflow_id = 'order-42'), 0::bigint,
  'deleting a workflow deletes its processed ids and compensations');

SELECT * FROM finish();
ROLLBACK;
