"""Isolation between destinations: a backlog in one stalls no row of another (RabbitMQ, least-privilege roles)."""

import time

import pytest

from harness import Broker, Consumer, Daemon, enqueue, pending_of, unique, wait_until, write_config

BULK_SQL = ("INSERT INTO outbox.messages (message_id, destination, session_id, body) "
            "SELECT %s || i, %s, 's' || (i %% 100), convert_to(lpad(i::text, 200, 'x'), 'UTF8') "
            "FROM generate_series(1, %s) i")


@pytest.fixture
def broker():
    return Broker("rabbitmq")


def test_a_row_of_another_destination_overtakes_a_backlog(workdir, database, broker):
    """A writer's 30,000 rows to bulk, then one row to payments: it arrives long before the bulk has drained,
    and the session that spans both destinations keeps its order."""
    bulk, payments = unique("bulk"), unique("payments")
    consumer = Consumer(broker, payments)
    daemon = Daemon(write_config(f"{workdir}/outboxd.yaml", database, broker)).start()
    try:
        wait_until(lambda: "database connected" in daemon.log(), what="connected")
        rows = 30000
        with database.writer() as conn, conn.cursor() as cur:
            cur.execute(BULK_SQL, (bulk + ":", bulk, rows))
            # Session s7 also has rows in the bulk: its payments row waits for them, in order.
            enqueue(cur, payments, "after-bulk-s7", b"s7", session_id="s7")
        with database.writer() as conn, conn.cursor() as cur:
            time.sleep(0.3)
            enqueue(cur, payments, "paid", b"paid")
            paid = time.monotonic()
        [message] = consumer.receive(1, timeout=60)
        waited = time.monotonic() - paid
        left = pending_of(database, bulk)
        assert message.id == "paid", message.id
        assert left > rows / 3, f"the payments row arrived after {waited:.2f} s, with only {left} bulk rows left"
        wait_until(lambda: pending_of(database, bulk) == 0, timeout=240, what="the bulk drained")
        [ordered] = consumer.receive(1, timeout=30)
        assert ordered.id == "after-bulk-s7"
        assert consumer.quiet_for(0.5) == []
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
