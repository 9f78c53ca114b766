#!/usr/bin/env node
// Order saga in Node (pg, rhea): the process manager, the simulated stock and payment services, and the shop that places orders.
//
// Usage: node order_saga.js saga | stock | payments | place COUNT [PER_SECOND]
//
// The same behaviour as ../python/order_saga.py, message for message. Every handler
// is one PostgreSQL transaction: it records the incoming message id
// (workflow.record_processed or outbox.record_received), changes state and enqueues
// every outgoing message with outbox.enqueue; the delivery is accepted at the broker
// only after the commit. Outgoing ids derive from the order id, so a handler that
// runs again enqueues nothing new. outboxd publishes the rows. Settings come from
// the environment: see ../README.md.
'use strict';

const pg = require('pg');
const rhea = require('rhea');

const ENV = process.env;
const PREFIX = ENV.ORDER_SAGA_PREFIX || 'order-saga';
const [ORDERS, STOCK, PAYMENTS] = ['orders', 'stock', 'payments'].map((q) => `${PREFIX}.${q}`);
const PAYMENT_TIMEOUT_MS = Number(ENV.ORDER_SAGA_PAYMENT_TIMEOUT_MS || 2500);
const TRANSFER_TIMEOUT_MS = Number(ENV.ORDER_SAGA_TRANSFER_TIMEOUT_MS || 3600000); // an order paid by bank transfer
const LATE_RATE = Number(ENV.ORDER_SAGA_LATE_RATE || 0.1);
const ABANDON_RATE = Number(ENV.ORDER_SAGA_ABANDON_RATE || 0.03);

// A number in [0, 1) from text (FNV-1a, then murmur3's finaliser): "random", but the same on every redelivery.
function fraction(text) {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text)) h = Math.imul(h ^ byte, 0x01000193) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return ((h ^ (h >>> 16)) >>> 0) / 2 ** 32;
}

// A message about an order from outside its workflow (the shop, the services): session and correlation are the
// order id, so outboxd keeps an order's messages in order.
// No delay passes due_at NULL (now), which enqueue() leaves out when it compares a replay with the row it
// wrote before; a given due_at is compared.
function enqueue(db, destination, messageId, subject, body, order, parent, delayMs = 0) {
  return db.query(
    `SELECT outbox.enqueue(destination => $1, message_id => $2, subject => $3, body => $4::jsonb,
                           session_id => $5, correlation_id => $5, parent_message_id => $6,
                           due_at => now() + $7 * interval '1 millisecond')`,
    [destination, messageId, subject, JSON.stringify(body), order, parent, delayMs || null]);
}

// A message of the order's workflow: workflow.emit gives it the order's session, correlation and originating ids.
function emit(db, order, destination, messageId, subject, body, parent) {
  return db.query('SELECT workflow.emit($1, $2, $3, $4::jsonb, subject => $5, parent_message_id => $6)',
    [order, destination, messageId, JSON.stringify(body), subject, parent]);
}

async function value(db, sql, params) {
  const result = await db.query({ text: sql, values: params, rowMode: 'array' });
  return result.rows[0][0];
}

// Runs handler(db, ...args) in one transaction; a version conflict (40001) or a deadlock (40P01) runs it again.
async function inTransaction(db, handler, ...args) {
  for (;;) {
    await db.query('BEGIN');
    try {
      const outcome = await handler(db, ...args);
      await db.query('COMMIT');
      return outcome;
    } catch (error) {
      await db.query('ROLLBACK');
      if (error.code !== '40001' && error.code !== '40P01') throw error;
      console.log('conflict', error.message);
    }
  }
}

// ---------------------------------------------------------------------------
// The process manager: one workflow per order, in workflow.instances
// ---------------------------------------------------------------------------

async function orderPlaced(db, messageId, sender, order, body) {
  const started = await value(db,
    `SELECT workflow.start($1, 'order', 'AwaitingPayment', correlation_id => $1,
                           originating_message_id => $2, data => $3::jsonb)`,
    [order, messageId, JSON.stringify({ amount: body.amount, reserved: false })]);
  if (!started) return 'duplicate'; // a redelivered OrderPlaced: the workflow exists
  await db.query('SELECT workflow.record_processed($1, $2, $3)', [order, messageId, sender]);
  const method = body.payment || 'card';
  await emit(db, order, STOCK, `${order}:reserve-stock:1`, 'ReserveStock', { orderId: order, quantity: 1 }, messageId);
  await emit(db, order, PAYMENTS, `${order}:capture-payment:1`, 'CapturePayment',
    { orderId: order, amount: body.amount, method }, messageId);
  const deadlineMs = method === 'transfer' ? TRANSFER_TIMEOUT_MS : PAYMENT_TIMEOUT_MS;
  await db.query(
    `SELECT workflow.set_timeout($1, $2, now() + $3 * interval '1 millisecond', $4, $5::jsonb,
                                 subject => 'PaymentTimeout', parent_message_id => $6)`,
    [order, `${order}:payment-timeout:1`, deadlineMs, ORDERS, JSON.stringify({ orderId: order }), messageId]);
  return 'AwaitingPayment';
}

// Applies one event to a started workflow; returns the new status, or why nothing changed.
async function transition(db, subject, messageId, sender, order) {
  if (!await value(db, 'SELECT workflow.record_processed($1, $2, $3)', [order, messageId, sender])) {
    return 'duplicate';
  }
  const state = (await db.query(
    'SELECT status, version, data, timeout_message_id FROM workflow.instances WHERE id = $1', [order])).rows[0];
  const { status, data } = state;
  let newStatus = status;
  if (subject === 'StockReserved') {
    data.reserved = true;
    if (status === 'Paid') newStatus = 'Confirmed';
  } else if (subject === 'PaymentCaptured' && status === 'AwaitingPayment') {
    await db.query('SELECT workflow.clear_timeout($1)', [order]);
    data.paid = true;
    newStatus = data.reserved ? 'Confirmed' : 'Paid';
  } else if (subject === 'PaymentCaptured' && status === 'Cancelled') {
    // Too late: the order was cancelled when the timeout fired. Give the money back.
    const refund = `${order}:refund-payment:1`;
    await db.query("SELECT workflow.record_compensation($1, 'refund-payment', $2)", [order, refund]);
    await emit(db, order, PAYMENTS, refund, 'RefundPayment', { orderId: order }, messageId);
    data.latePayment = true;
  } else if (subject === 'PaymentTimeout') {
    if (status !== 'AwaitingPayment' || state.timeout_message_id !== messageId) {
      return 'stale timeout'; // paid in time (clear_timeout came too late to cancel it)
    }
    await db.query('SELECT workflow.clear_timeout($1)', [order]);
    const release = `${order}:release-stock:1`;
    await db.query("SELECT workflow.record_compensation($1, 'release-stock', $2)", [order, release]);
    await emit(db, order, STOCK, release, 'ReleaseStock', { orderId: order }, messageId);
    data.timedOut = messageId;
    newStatus = 'Cancelled';
  } else if (subject === 'StockReleased' || subject === 'PaymentRefunded') {
    const step = subject === 'StockReleased' ? 'release-stock' : 'refund-payment';
    await db.query("SELECT workflow.set_compensation_status($1, $2, 'completed')", [order, step]);
  } else {
    return `ignored ${subject} in ${status}`;
  }
  await db.query('SELECT workflow.save($1, $2, $3, $4::jsonb)', [order, state.version, newStatus, JSON.stringify(data)]);
  return newStatus;
}

function saga(db, message) {
  const body = JSON.parse(message.body);
  if (message.subject === 'OrderPlaced') return orderPlaced(db, message.id, message.writer, body.orderId, body);
  return transition(db, message.subject, message.id, message.writer, body.orderId);
}

// ---------------------------------------------------------------------------
// The simulated services: an inbox each (outbox.record_received), a ledger, a reply
// ---------------------------------------------------------------------------

// Keyed by the sending writer too (the outboxd_writer property): message ids are each writer's own.
const received = (db, consumer, message) =>
  value(db, 'SELECT outbox.record_received($1, $2, $3)',
    [consumer, message.id, message.writer]);

const recordPayment = (db, order, kind, messageId, delayMs) => db.query(
  `INSERT INTO shop.payment_moves (order_id, kind, message_id, effective_at)
   VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')`, [order, kind, messageId, delayMs]);

async function stock(db, message) {
  if (!await received(db, 'stock', message)) return 'duplicate';
  const order = JSON.parse(message.body).orderId;
  const [kind, reply, replyId] = {
    ReserveStock: ['reserve', 'StockReserved', `${order}:stock-reserved:1`],
    ReleaseStock: ['release', 'StockReleased', `${order}:stock-released:1`],
  }[message.subject];
  await db.query('INSERT INTO shop.stock_moves (order_id, kind, message_id) VALUES ($1, $2, $3)',
    [order, kind, message.id]);
  const delayMs = Math.floor(fraction(message.id) * 300); // a warehouse that answers within 0.3 s
  await enqueue(db, ORDERS, replyId, reply, { orderId: order }, order, message.id, delayMs);
  return reply;
}

async function payments(db, message) {
  if (!await received(db, 'payments', message)) return 'duplicate';
  const body = JSON.parse(message.body);
  const order = body.orderId;
  if (message.subject === 'RefundPayment') {
    await recordPayment(db, order, 'refund', message.id, 0);
    await enqueue(db, ORDERS, `${order}:payment-refunded:1`, 'PaymentRefunded', { orderId: order }, order, message.id);
    return 'PaymentRefunded';
  }
  const chance = fraction(`payment:${order}`);
  // The customer never pays; the simulated ones never make a bank transfer either.
  if (chance < ABANDON_RATE || body.method === 'transfer') {
    await recordPayment(db, order, 'abandon', message.id, 0);
    return 'abandoned';
  }
  const delayMs = chance < ABANDON_RATE + LATE_RATE
    ? PAYMENT_TIMEOUT_MS + 1000 + Math.floor(fraction(message.id) * 1000) // after the timeout
    : 100 + Math.floor(fraction(message.id) * 900);
  await recordPayment(db, order, 'capture', message.id, delayMs);
  await enqueue(db, ORDERS, `${order}:payment-captured:1`, 'PaymentCaptured', { orderId: order }, order,
    message.id, delayMs);
  return 'PaymentCaptured';
}

// ---------------------------------------------------------------------------
// AMQP 1.0: accept a delivery only after its transaction committed
// ---------------------------------------------------------------------------

function consume(pool, queue, handler) {
  const url = new URL(ENV.ORDER_SAGA_AMQP_URL);
  const connection = rhea.create_container().connect({
    host: url.hostname, port: Number(url.port), username: ENV.ORDER_SAGA_AMQP_USER,
    password: ENV.ORDER_SAGA_AMQP_PASSWORD,
  });
  // A durable source: the durable queue outboxd's rabbitmq profile writes to.
  const receiver = connection.open_receiver({
    source: { address: `/queue/${queue}`, durable: 2 }, autoaccept: false, credit_window: 50,
  });
  receiver.on('receiver_open', () => console.log('ready', queue));
  // Orders in parallel (one pooled connection each), an order's messages one at a time in
  // arrival order: its group-id is the order's session_id, which outboxd sends in order.
  const chains = new Map();
  receiver.on('message', ({ message, delivery }) => {
    const m = {
      id: message.message_id, subject: message.subject, body: message.body.content.toString('utf8'),
      writer: (message.application_properties || {}).outboxd_writer,
    };
    const key = message.group_id;
    const run = (chains.get(key) || Promise.resolve()).then(async () => {
      const db = await pool.connect();
      try {
        const outcome = await inTransaction(db, handler, m);
        if (outcome === 'duplicate') console.log('duplicate', m.id);
      } finally {
        db.release();
      }
      delivery.accept();
    }).catch((error) => {
      console.error(error);
      process.exit(1); // redelivered to the next process; the inbox makes that harmless
    });
    chains.set(key, run);
    run.then(() => { if (chains.get(key) === run) chains.delete(key); });
  });
  connection.on('disconnected', (context) => console.log('disconnected', context.error ? context.error.message : ''));
}

// The shop: OrderPlaced for order-1..order-COUNT, at PER_SECOND orders a second, ten to a transaction.
async function place(db, count, perSecond) {
  for (let first = 1; first <= count; first += 10) {
    await inTransaction(db, async () => {
      for (let n = first; n < Math.min(first + 10, count + 1); n++) {
        const order = `order-${n}`;
        await enqueue(db, ORDERS, `${order}:placed`, 'OrderPlaced', { orderId: order, amount: 1000 + n }, order, null);
      }
    });
    await new Promise((resolve) => setTimeout(resolve, 10000 / perSecond));
  }
  console.log('placed', count);
}

async function main(argv) {
  const handlers = { saga: [ORDERS, saga], stock: [STOCK, stock], payments: [PAYMENTS, payments] };
  const pool = new pg.Pool({ connectionString: ENV.ORDER_SAGA_DATABASE_URL, max: 4 });
  if (argv[0] === 'place' && (argv.length === 2 || argv.length === 3)) {
    const db = await pool.connect();
    await place(db, Number(argv[1]), argv.length === 3 ? Number(argv[2]) : 100);
    db.release();
    await pool.end();
  } else if (argv.length === 1 && handlers[argv[0]]) {
    consume(pool, ...handlers[argv[0]]);
  } else {
    console.error('usage: node order_saga.js saga | stock | payments | place COUNT [PER_SECOND]');
    process.exit(2);
  }
}

main(process.argv.slice(2)).catch((error) => {
  console.error(error);
  process.exit(1);
});
