// A Node application (rhea) reading what outboxd sent to RabbitMQ; prints every AMQP field it sees as JSON lines.
// Usage: node rhea_consumer.js ADDRESS COUNT   (broker from OUTBOXD_TEST_RABBITMQ_URL, _USER, _PASSWORD)
'use strict';
const rhea = require('rhea');

const [address, count] = [process.argv[2], Number(process.argv[3])];
const url = new URL(process.env.OUTBOXD_TEST_RABBITMQ_URL);
const container = rhea.create_container();
let received = 0;

// A data section arrives as a Section object; anything else would be an amqp-value or amqp-sequence.
function body(message) {
  const b = message.body;
  if (b && b.typecode === 0x75) return { section: 'data', base64: b.content.toString('base64') };
  return { section: 'other', value: String(b) };
}

container.on('message', (context) => {
  const m = context.message;
  console.log(JSON.stringify({
    message_id: m.message_id,
    correlation_id: m.correlation_id,
    group_id: m.group_id,
    subject: m.subject,
    content_type: m.content_type,
    creation_time: m.creation_time instanceof Date ? m.creation_time.getTime() : m.creation_time,
    ttl: m.ttl,
    durable: m.durable,
    body: body(m),
    application_properties: m.application_properties,
  }));
  if (++received === count) context.connection.close();
});
container.on('error', (context) => { console.error(String(context.error)); process.exitCode = 1; });

const connection = container.connect({
  host: url.hostname, port: Number(url.port),
  username: process.env.OUTBOXD_TEST_RABBITMQ_USER, password: process.env.OUTBOXD_TEST_RABBITMQ_PASSWORD,
});
// A durable source: RabbitMQ declares the queue as outboxd's durable target does.
connection.open_receiver({ source: { address, durable: 2 } });
setTimeout(() => { console.error(`only ${received} of ${count} messages within 60 s`); process.exit(1); }, 60000).unref();
