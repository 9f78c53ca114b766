#!/usr/bin/python3
"""Order saga in Python: the process manager, the simulated stock and payment services, and the shop that places orders.

Usage: order_saga.py saga | stock | payments | place COUNT [PER_SECOND]

Every handler is one PostgreSQL transaction: it records the incoming message id
(workflow.record_processed or outbox.record_received), changes state and
enqueues every outgoing message with outbox.enqueue; the delivery is accepted
at the broker only after the commit. Outgoing ids derive from the order id, so
a handler that runs again enqueues nothing new. outboxd publishes the rows.

Settings come from the environment (see ../README.md):
  ORDER_SAGA_DATABASE_URL   a login role holding only outbox_writer
  ORDER_SAGA_AMQP_URL, ORDER_SAGA_AMQP_USER, ORDER_SAGA_AMQP_PASSWORD
  ORDER_SAGA_PREFIX         queue name prefix (default order-saga)
  ORDER_SAGA_PAYMENT_TIMEOUT_MS (2500), ORDER_SAGA_LATE_RATE (0.10), ORDER_SAGA_ABANDON_RATE (0.03)
  ORDER_SAGA_TRANSFER_TIMEOUT_MS (3600000): the deadline of an order paid by bank transfer
"""

import json
import os
import sys
import time
from urllib.parse import urlparse

import psycopg2
import psycopg2.errors
from proton import Terminus
from proton.handlers import MessagingHandler
from proton.reactor import Container, ReceiverOption

ENV = os.environ
PREFIX = ENV.get("ORDER_SAGA_PREFIX", "order-saga")
ORDERS, STOCK, PAYMENTS = f"{PREFIX}.orders", f"{PREFIX}.stock", f"{PREFIX}.payments"
PAYMENT_TIMEOUT_MS = int(ENV.get("ORDER_SAGA_PAYMENT_TIMEOUT_MS", "2500"))
TRANSFER_TIMEOUT_MS = int(ENV.get("ORDER_SAGA_TRANSFER_TIMEOUT_MS", "3600000"))
LATE_RATE = float(ENV.get("ORDER_SAGA_LATE_RATE", "0.10"))
ABANDON_RATE = float(ENV.get("ORDER_SAGA_ABANDON_RATE", "0.03"))


def log(*words):
    print(*words, flush=True)


def fraction(text):
    """A number in [0, 1) from text (FNV-1a, then murmur3's finaliser): "random", but the same on every redelivery."""
    h = 0x811C9DC5
    for byte in text.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & 0xFFFFFFFF
    return (h ^ (h >> 16)) / 2**32


def enqueue(cur, destination, message_id, subject, body, order, parent, delay_ms=0):
    """A message about an order from outside its workflow (the shop, the services): session and correlation are the order id.

    No delay passes due_at NULL (now), which enqueue() leaves out when it compares a
    replay with the row it wrote before; a given due_at is compared.
    """
    cur.execute(
        """SELECT outbox.enqueue(destination => %s, message_id => %s, subject => %s, body => %s::jsonb,
                                 session_id => %s, correlation_id => %s, parent_message_id => %s,
                                 due_at => now() + %s * interval '1 millisecond')""",
        (destination, message_id, subject, json.dumps(body), order, order, parent, delay_ms or None))


def emit(cur, order, destination, message_id, subject, body, parent):
    """A message of the order's workflow: workflow.emit gives it the order's session, correlation and originating ids."""
    cur.execute("SELECT workflow.emit(%s, %s, %s, %s::jsonb, subject => %s, parent_message_id => %s)",
                (order, destination, message_id, json.dumps(body), subject, parent))


def in_transaction(conn, handler, *args):
    """Runs handler(cur, *args) in one transaction; a version conflict (40001) or a deadlock (40P01) runs it again."""
    while True:
        try:
            with conn, conn.cursor() as cur:
                return handler(cur, *args)
        except (psycopg2.errors.SerializationFailure, psycopg2.errors.DeadlockDetected) as conflict:
            log("conflict", str(conflict).splitlines()[0])


# ---------------------------------------------------------------------------
# The process manager: one workflow per order, in workflow.instances
# ---------------------------------------------------------------------------

def order_placed(cur, message_id, sender, order, body):
    cur.execute("SELECT workflow.start(%s, 'order', 'AwaitingPayment', correlation_id => %s,"
                " originating_message_id => %s, data => %s::jsonb)",
                (order, order, message_id, json.dumps({"amount": body["amount"], "reserved": False})))
    if not cur.fetchone()[0]:
        return "duplicate"  # a redelivered OrderPlaced: the workflow exists
    cur.execute("SELECT workflow.record_processed(%s, %s, %s)", (order, message_id, sender))
    method = body.get("payment", "card")
    emit(cur, order, STOCK, f"{order}:reserve-stock:1", "ReserveStock", {"orderId": order, "quantity": 1}, message_id)
    emit(cur, order, PAYMENTS, f"{order}:capture-payment:1", "CapturePayment",
         {"orderId": order, "amount": body["amount"], "method": method}, message_id)
    deadline_ms = TRANSFER_TIMEOUT_MS if method == "transfer" else PAYMENT_TIMEOUT_MS
    cur.execute("SELECT workflow.set_timeout(%s, %s, now() + %s * interval '1 millisecond', %s, %s::jsonb,"
                " subject => 'PaymentTimeout', parent_message_id => %s)",
                (order, f"{order}:payment-timeout:1", deadline_ms, ORDERS,
                 json.dumps({"orderId": order}), message_id))
    return "AwaitingPayment"


def transition(cur, subject, message_id, sender, order):
    """Applies one event to a started workflow; returns the new status, or why nothing changed."""
    cur.execute("SELECT workflow.record_processed(%s, %s, %s)", (order, message_id, sender))
    if not cur.fetchone()[0]:
        return "duplicate"
    cur.execute("SELECT status, version, data, timeout_message_id FROM workflow.instances WHERE id = %s", (order,))
    status, version, data, timeout_id = cur.fetchone()
    new_status = status
    if subject == "StockReserved":
        data["reserved"] = True
        if status == "Paid":
            new_status = "Confirmed"
    elif subject == "PaymentCaptured" and status == "AwaitingPayment":
        cur.execute("SELECT workflow.clear_timeout(%s)", (order,))
        data["paid"] = True
        new_status = "Confirmed" if data["reserved"] else "Paid"
    elif subject == "PaymentCaptured" and status == "Cancelled":
        # Too late: the order was cancelled when the timeout fired. Give the money back.
        refund = f"{order}:refund-payment:1"
        cur.execute("SELECT workflow.record_compensation(%s, 'refund-payment', %s)", (order, refund))
        emit(cur, order, PAYMENTS, refund, "RefundPayment", {"orderId": order}, message_id)
        data["latePayment"] = True
    elif subject == "PaymentTimeout":
        if status != "AwaitingPayment" or timeout_id != message_id:
            return "stale timeout"  # paid in time (clear_timeout came too late to cancel it)
        cur.execute("SELECT workflow.clear_timeout(%s)", (order,))
        release = f"{order}:release-stock:1"
        cur.execute("SELECT workflow.record_compensation(%s, 'release-stock', %s)", (order, release))
        emit(cur, order, STOCK, release, "ReleaseStock", {"orderId": order}, message_id)
        data["timedOut"] = message_id
        new_status = "Cancelled"
    elif subject in ("StockReleased", "PaymentRefunded"):
        step = "release-stock" if subject == "StockReleased" else "refund-payment"
        cur.execute("SELECT workflow.set_compensation_status(%s, %s, 'completed')", (order, step))
    else:
        return f"ignored {subject} in {status}"
    cur.execute("SELECT workflow.save(%s, %s, %s, %s::jsonb)", (order, version, new_status, json.dumps(data)))
    return new_status


def saga(cur, message):
    body = json.loads(message.body)
    if message.subject == "OrderPlaced":
        return order_placed(cur, message.id, writer_of(message), body["orderId"], body)
    return transition(cur, message.subject, message.id, writer_of(message), body["orderId"])


# ---------------------------------------------------------------------------
# The simulated services: an inbox each (outbox.record_received), a ledger, a reply
# ---------------------------------------------------------------------------

def stock(cur, message):
    if not received(cur, "stock", message):
        return "duplicate"
    order = json.loads(message.body)["orderId"]
    kind, reply, reply_id = {"ReserveStock": ("reserve", "StockReserved", f"{order}:stock-reserved:1"),
                             "ReleaseStock": ("release", "StockReleased", f"{order}:stock-released:1")}[message.subject]
    cur.execute("INSERT INTO shop.stock_moves (order_id, kind, message_id) VALUES (%s, %s, %s)",
                (order, kind, message.id))
    delay_ms = int(fraction(message.id) * 300)  # a warehouse that answers within 0.3 s
    enqueue(cur, ORDERS, reply_id, reply, {"orderId": order}, order, message.id, delay_ms)
    return reply


def payments(cur, message):
    if not received(cur, "payments", message):
        return "duplicate"
    body = json.loads(message.body)
    order = body["orderId"]
    if message.subject == "RefundPayment":
        record_payment(cur, order, "refund", message.id, 0)
        enqueue(cur, ORDERS, f"{order}:payment-refunded:1", "PaymentRefunded", {"orderId": order}, order, message.id)
        return "PaymentRefunded"
    chance = fraction(f"payment:{order}")
    # The customer never pays; the simulated ones never make a bank transfer either.
    if chance < ABANDON_RATE or body.get("method") == "transfer":
        record_payment(cur, order, "abandon", message.id, 0)
        return "abandoned"
    if chance < ABANDON_RATE + LATE_RATE:
        delay_ms = PAYMENT_TIMEOUT_MS + 1000 + int(fraction(message.id) * 1000)  # after the timeout
    else:
        delay_ms = 100 + int(fraction(message.id) * 900)
    record_payment(cur, order, "capture", message.id, delay_ms)
    enqueue(cur, ORDERS, f"{order}:payment-captured:1", "PaymentCaptured", {"orderId": order}, order, message.id,
            delay_ms)
    return "PaymentCaptured"


def writer_of(message):
    """The login role that wrote the message: ids are each writer's own, so duplicates are told by both."""
    return (message.properties or {}).get("outboxd_writer")


def received(cur, consumer, message):
    cur.execute("SELECT outbox.record_received(%s, %s, %s)", (consumer, message.id, writer_of(message)))
    return cur.fetchone()[0]


def record_payment(cur, order, kind, message_id, delay_ms):
    cur.execute("INSERT INTO shop.payment_moves (order_id, kind, message_id, effective_at)"
                " VALUES (%s, %s, %s, now() + %s * interval '1 millisecond')", (order, kind, message_id, delay_ms))


# ---------------------------------------------------------------------------
# AMQP 1.0: accept a delivery only after its transaction committed
# ---------------------------------------------------------------------------

class DurableQueue(ReceiverOption):
    """Reads the durable queue outboxd's rabbitmq profile writes to."""

    def apply(self, receiver):
        receiver.source.durability = Terminus.DELIVERIES


class Consumer(MessagingHandler):
    def __init__(self, conn, queue, handler):
        super().__init__(prefetch=50, auto_accept=False)
        self.conn, self.queue, self.handler = conn, queue, handler

    def on_start(self, event):
        url = urlparse(ENV["ORDER_SAGA_AMQP_URL"])
        connection = event.container.connect(f"{url.hostname}:{url.port}", user=ENV.get("ORDER_SAGA_AMQP_USER"),
                                             password=ENV.get("ORDER_SAGA_AMQP_PASSWORD"), allowed_mechs="PLAIN")
        event.container.create_receiver(connection, f"/queue/{self.queue}", options=DurableQueue())
        log("ready", self.queue)

    def on_message(self, event):
        outcome = in_transaction(self.conn, self.handler, event.message)
        if outcome == "duplicate":
            log("duplicate", event.message.id)
        self.accept(event.delivery)


def place(conn, count, per_second):
    """The shop: OrderPlaced for order-1..order-COUNT, at PER_SECOND orders a second, ten to a transaction."""
    for first in range(1, count + 1, 10):
        with conn, conn.cursor() as cur:
            for n in range(first, min(first + 10, count + 1)):
                order = f"order-{n}"
                enqueue(cur, ORDERS, f"{order}:placed", "OrderPlaced", {"orderId": order, "amount": 1000 + n},
                        order, None)
        time.sleep(10 / per_second)
    log("placed", count)


def main(argv):
    handlers = {"saga": (ORDERS, saga), "stock": (STOCK, stock), "payments": (PAYMENTS, payments)}
    conn = psycopg2.connect(ENV["ORDER_SAGA_DATABASE_URL"])
    if argv[:1] == ["place"] and len(argv) in (2, 3):
        place(conn, int(argv[1]), float(argv[2]) if len(argv) == 3 else 100.0)
    elif len(argv) == 1 and argv[0] in handlers:
        Container(Consumer(conn, *handlers[argv[0]])).run()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
