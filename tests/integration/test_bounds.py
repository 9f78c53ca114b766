"""outboxd's byte bounds against real PostgreSQL and RabbitMQ: the largest message and the memory budgets."""

import pytest

from harness import Broker, Consumer, Daemon, enqueue, unique, wait_until, write_config


@pytest.fixture
def broker():
    return Broker("rabbitmq")


def start_daemon(workdir, database, broker, /, **sections):
    return Daemon(write_config(f"{workdir}/outboxd.yaml", database, broker, **sections)).start()


def test_a_row_over_the_largest_message_parks_at_once_with_its_size_and_other_sessions_flow(
        workdir, database, broker):
    queue = unique("oversize")
    consumer = Consumer(broker, queue)
    daemon = start_daemon(workdir, database, broker, dispatch={"max_message_bytes": 65536})
    try:
        with database.connect(autocommit=False) as conn, conn.cursor() as cur:
            enqueue(cur, queue, "big-1", b"x" * 100_000, session_id="big")
            enqueue(cur, queue, "big-2", b"x", session_id="big")
            for i in range(20):
                enqueue(cur, queue, f"good-{i}", b"y" * 1000, session_id=f"good{i % 4}")
        parked = wait_until(lambda: database.query(
            "SELECT attempts, last_error FROM outbox.messages WHERE message_id = 'big-1' AND status = 'parked'"),
            timeout=10, what="big-1 parked")
        ids = sorted(m.id for m in consumer.receive(20, timeout=20) + consumer.quiet_for(0.5))
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert ids == sorted(f"good-{i}" for i in range(20)), "every good row, and neither big one"
    attempts, last_error = parked[0]
    assert attempts == 1, "parked at once, not retried"
    assert "100002 bytes" in last_error and "limit of 65536 bytes" in last_error, last_error
    assert database.query("SELECT status FROM outbox.messages WHERE message_id = 'big-2'") == [("pending",)]
