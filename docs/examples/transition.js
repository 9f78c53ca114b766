// An application's transaction in Node (pg): the outbox errors it handles, a transition retried on 40001.
'use strict';
const { Client } = require('pg');

const RETRIED = new Set(['40001', '40P01']); // version conflict, deadlock: run the transaction again

async function handle(db, workflowId, messageId, status, meanwhile = async () => {}) {
  for (let attempt = 1; attempt <= 5; attempt++) {
    await db.query('BEGIN');
    try {
      const fresh = await db.query('SELECT workflow.record_processed($1, $2) AS fresh', [workflowId, messageId]);
      if (!fresh.rows[0].fresh) { await db.query('COMMIT'); return null; } // handled before: emit nothing
      const { rows } = await db.query('SELECT version FROM workflow.instances WHERE id = $1', [workflowId]);
      const version = Number(rows[0].version);
      await meanwhile(attempt); // here another process may save the same workflow
      await db.query('SELECT workflow.save($1, $2, $3, NULL)', [workflowId, version, status]);
      await db.query("SELECT workflow.emit($1, 'payments', $2, $3::jsonb)",
        [workflowId, `${workflowId}:capture-payment:1`, '{"orderId": 42}']);
      await db.query('COMMIT');
      return version + 1;
    } catch (e) {
      await db.query('ROLLBACK');
      if (!RETRIED.has(e.code)) throw e;
      console.log(`attempt ${attempt}: ${e.code}, retrying`);
    }
  }
  throw new Error(`${workflowId}: gave up after 5 attempts`);
}

async function expectError(db, sql, params) {
  try {
    await db.query(sql, params);
  } catch (e) {
    console.log(`${e.code}: ${e.message}`); // 23505, 22023, 23514: a bug to fix, not to retry
  }
}

async function main(url) {
  const app = new Client(url);
  const other = new Client(url);
  await app.connect();
  await other.connect();
  await app.query("SELECT workflow.start('order-42', 'order-fulfilment', 'AwaitingInventory')");
  await app.query("SELECT outbox.enqueue('orders', 'order-42:placed:1', $1::jsonb)", ['{"orderId": 42}']);
  await expectError(app, "SELECT outbox.enqueue('orders', 'order-42:placed:1', $1::jsonb)", ['{"orderId": 43}']);
  await expectError(app, "SELECT outbox.enqueue('orders', 'order-42:placed:2', headers => $1)", ['{"a": {"b": 1}}']);
  await expectError(app, "INSERT INTO outbox.messages (message_id, destination, headers) VALUES ($1, 'orders', $2)",
    ['order-42:placed:2', '{"a": {"b": 1}}']);
  const otherSavesFirst = async (attempt) => {
    if (attempt === 1) await other.query("SELECT workflow.save('order-42', 1, 'Cancelling', NULL)");
  };
  console.log(`saved version ${await handle(app, 'order-42', 'inventory:reserved:42', 'AwaitingPayment', otherSavesFirst)}`);
  console.log(`again: ${await handle(app, 'order-42', 'inventory:reserved:42', 'AwaitingPayment')}`);
  await app.end();
  await other.end();
}

main(process.argv[2]).catch((e) => { console.error(e); process.exit(1); });
