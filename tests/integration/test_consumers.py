"""Consumers that keep outboxd's per-session order on the broker side: RabbitMQ's single-active-consumer queue."""

import os
import time

from harness import Broker, Daemon, enqueue, rabbitmq_has_queue, rabbitmqctl, run_cli, unique, wait_until, write_config


def declare_single_active_consumer_queue(workdir, name):
    # AMQP 1.0 cannot pass queue arguments, so the queue is declared beforehand, here
    # through a definitions import (an operator would use the management UI or a policy-free declare).
    path = os.path.join(workdir, "queue.json")
    with open(path, "w") as f:
        f.write('{"queues": [{"name": "%s", "vhost": "/", "durable": true, "auto_delete": false, '
                '"arguments": {"x-single-active-consumer": true}}]}' % name)
    rabbitmqctl("import_definitions", path)
    wait_until(lambda: rabbitmq_has_queue(name), timeout=30, what=f"queue {name}")


def receive(receiver, count, timeout):
    """Up to `count` messages, each accepted; returns them."""
    got, deadline = [], time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        try:
            message = receiver.receive(timeout=0.5)
        except Exception:  # proton.Timeout: keep waiting until the deadline
            continue
        receiver.accept()
        got.append(message)
    return got


def test_single_active_consumer_keeps_session_order_across_a_handover(workdir, database):
    broker = Broker("rabbitmq")
    queue = unique("sac")
    declare_single_active_consumer_queue(workdir, queue)
    address = f"/amq/queue/{queue}"  # an existing queue: /queue/NAME would declare it again, without the argument
    first, second = broker.connect(), broker.connect()
    active = first.create_receiver(address, credit=10)
    standby = second.create_receiver(address, credit=10)
    sessions, per_session = 20, 50
    path = write_config(f"{workdir}/outboxd.yaml", database, broker)
    run_cli("migrate", "-c", path)
    # A full address is the DBA's to allow (docs/sql.md, destinations).
    database.query("UPDATE outbox.settings SET allowed_address_prefixes = '{/amq/queue/}'")
    daemon = Daemon(path).start()
    try:
        with database.writer() as conn, conn.cursor() as cur:
            for i in range(per_session):
                for s in range(sessions):
                    enqueue(cur, address, f"s{s}:{i}", f"{i}".encode(), session_id=f"s{s}")
        before = receive(active, 300, timeout=60)
        assert len(before) == 300
        assert receive(standby, 1, timeout=1.0) == [], "the standby consumer got a message while the first was active"
        # The first consumer goes away holding up to 10 delivered but unsettled messages:
        # RabbitMQ puts them back in place and makes the standby consumer active.
        first.close()
        after = receive(standby, sessions * per_session - len(before), timeout=60)
    finally:
        second.close()
        assert daemon.stop() == 0, daemon.log()
    assert len(before) + len(after) == sessions * per_session
    last = {}
    for message in before + after:
        seq = int(message.body)
        assert seq == last.get(message.group_id, -1) + 1, f"{message.group_id}: {seq} after {last.get(message.group_id)}"
        last[message.group_id] = seq
    print(f"single active consumer: {len(before)} accepted by the first, {len(after)} by the second after the "
          f"handover, per-session order kept in {sessions} sessions")
