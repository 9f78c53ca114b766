"""A message id is its writer's own: two applications use the same id, both messages go out and are told apart
by consumers and operators (RabbitMQ, least-privilege roles)."""

import psycopg2
import pytest

from harness import Broker, Consumer, Daemon, enqueue, run_cli, unique, write_config

SHARED_ID = "order-43:placed:1"
PARKED_ID = "order-44:placed:1"


@pytest.fixture
def broker():
    return Broker("rabbitmq")


def test_two_writers_one_id_reach_the_consumer_apart_and_operators_name_the_writer(workdir, database, broker):
    """App B enqueues the id app A uses next: A's own transaction still commits, the consumer gets both
    messages with the same message-id and different outboxd_writer, its inbox takes both, and an operator
    must name the writer to act on one of them."""
    orders = unique("orders")
    app_a, app_b = database.writer_role, database.add_writer("app_b")
    consumer = Consumer(broker, orders)
    path = write_config(f"{workdir}/outboxd.yaml", database, broker)
    daemon = Daemon(path).start()
    try:
        with database.writer(role=app_b) as conn, conn.cursor() as cur:
            enqueue(cur, orders, SHARED_ID, b"b's junk")
        with database.writer() as conn, conn.cursor() as cur:  # app A's business transaction
            enqueue(cur, orders, SHARED_ID, b"a's real event")
        messages = consumer.receive(2, timeout=30)
        assert sorted((m.id, m.properties["outboxd_writer"], bytes(m.body)) for m in messages) == sorted(
            [(SHARED_ID, app_b, b"b's junk"), (SHARED_ID, app_a, b"a's real event")])

        # The consumer's inbox, keyed by the sender as well: A's real message is not a duplicate of B's.
        with database.writer() as conn, conn.cursor() as cur:
            recorded = []
            for message in messages:
                cur.execute("SELECT outbox.record_received('orders-svc', %s, %s)",
                            (message.id, message.properties["outboxd_writer"]))
                recorded.append(cur.fetchone()[0])
            cur.execute("SELECT outbox.record_received('orders-svc', %s, %s)", (SHARED_ID, app_a))
            recorded.append(cur.fetchone()[0])
        assert recorded == [True, True, False]
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()

    # Two parked rows with one id, one per writer: an operator must say whose.
    for role in (app_a, app_b):
        with database.writer(role=role) as conn, conn.cursor() as cur:
            enqueue(cur, orders, PARKED_ID, role.encode())
    database.query("UPDATE outbox.messages SET status = 'parked', attempts = 3, last_error = 'rejected: test' "
                   "WHERE message_id = %s", (PARKED_ID,))
    shown = run_cli("show", PARKED_ID, "-c", path, check=False)
    assert shown.returncode == 2, shown.stdout + shown.stderr
    assert "names rows of 2 writers" in shown.stderr and app_a in shown.stderr and app_b in shown.stderr
    assert shown.stdout == ""
    shown = run_cli("show", PARKED_ID, "--writer", app_b, "--json", "-c", path)
    assert f'"writer": "{app_b}"' in shown.stdout

    refused = run_cli("skip", PARKED_ID, "-c", path, check=False)
    assert refused.returncode != 0
    assert "names rows of more than one writer" in refused.stderr, refused.stderr
    skipped = run_cli("skip", PARKED_ID, "--writer", app_b, "-c", path)
    assert "skip: 1 parked row" in skipped.stdout
    assert set(database.query("SELECT writer, status FROM outbox.messages WHERE message_id = %s",
                              (PARKED_ID,))) == {(app_a, "parked"), (app_b, "cancelled")}


def test_a_writer_cannot_forge_the_writer_property(database):
    """outboxd_ header keys are the daemon's: refused when written, so no row can claim another writer."""
    with database.writer() as conn, conn.cursor() as cur:
        with pytest.raises(psycopg2.Error) as refused:
            cur.execute("SELECT outbox.enqueue('orders', 'forged', headers => '{\"outboxd_writer\": \"someone\"}')")
    assert refused.value.pgcode == "22023"
    assert "reserved for outboxd's own properties" in str(refused.value)
