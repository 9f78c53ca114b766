"""Broker failover: the RabbitMQ node the daemon publishes to is killed mid-run; it moves to another by itself.

A cluster of three RabbitMQ nodes of the test's own holds a quorum queue (a
replica on every node: it survives the loss of one). The daemon names every
node in broker.urls; a writer commits rows over many sessions; the node the
daemon is connected to dies with kill -9. Every committed row must then be
in the queue, read through a surviving node; each session's first deliveries
keep their order; duplicates stay within the in-flight window; the daemon
resumes on another node without a restart.
"""

import datetime
import re
import time
import urllib.request

import pytest

from harness import Consumer, Daemon, free_port, unique, wait_until, write_config
from rabbit_cluster import RabbitCluster
from steady_writer import Writer, session_order_violations

RECONNECT_MAX_MS = 1000
IN_FLIGHT = 200


@pytest.fixture
def cluster():
    started = RabbitCluster(3)
    try:
        yield started.start()
    finally:
        started.remove()


def connected_node(port):
    """The node outboxd_broker_node names (host:port), or None while the daemon is not connected."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
    except OSError:
        return None
    found = re.search(r'^outboxd_broker_node\{node="([^"]+)"\} 1$', text, re.MULTILINE)
    return found and found.group(1)


def log_time(log, text):
    """The time (s since the epoch) of the first log line holding `text`."""
    line = next(line for line in log.splitlines() if text in line)
    stamp = datetime.datetime.strptime(line.split(" ", 1)[0], "%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.replace(tzinfo=datetime.timezone.utc).timestamp()


def test_daemon_follows_the_broker_to_another_node(workdir, database, cluster):
    queue = unique("broker_failover")
    cluster.declare_quorum_queue(queue)
    # The rabbitmq profile's /queue/NAME would declare a classic queue, which RabbitMQ 3.x refuses
    # for a quorum queue of that name: /amq/queue/NAME addresses the existing queue as it is.
    destination = f"/amq/queue/{queue}"
    database.query("UPDATE outbox.settings SET allowed_address_prefixes = '{/amq/queue/}'")
    http_port = free_port()
    path = write_config(f"{workdir}/outboxd.yaml", database, cluster.nodes[0],
                        broker={"urls": cluster.urls, "reconnect_min_ms": 100, "reconnect_max_ms": RECONNECT_MAX_MS},
                        dispatch={"in_flight": IN_FLIGHT},
                        retention={"mode": "keep"}, http={"listen": f"127.0.0.1:{http_port}"})
    daemon = Daemon(path).start()
    writer = Writer(database.writer_url, destination, sessions=32)

    def dispatched():
        return database.query("SELECT count(*) FROM outbox.messages WHERE status = 'dispatched'")[0][0]

    consumer = None
    try:
        writer.start()
        wait_until(lambda: dispatched() > 300, timeout=30, what=f"rows flowing before the kill\n{daemon.log()[-3000:]}")
        victim = connected_node(http_port)
        assert victim is not None, daemon.log()
        cluster.kill(cluster.index_of(victim))
        killed_at = time.time()
        wait_until(lambda: connected_node(http_port) not in (None, victim), timeout=30,
                   what=f"the daemon connected to another node\n{daemon.log()[-3000:]}")
        survivor = connected_node(http_port)
        wait_until(lambda: database.query("SELECT count(*) FROM outbox.messages WHERE status = 'dispatched' "
                                          "AND created_at > to_timestamp(%s)", (killed_at,))[0][0] > 0,
                   timeout=30, what="a row written after the kill dispatched")
        time.sleep(2)
        writer.stopping.set()
        writer.join(timeout=30)
        wait_until(lambda: database.query("SELECT count(*) FROM outbox.messages WHERE status <> 'dispatched'")[0][0]
                   == 0, timeout=60, what=f"every row dispatched\n{daemon.log()[-3000:]}")

        rows = dict(database.query("SELECT message_id, session_id FROM outbox.messages"))
        committed = [message_id for message_id, _ in writer.committed] + [m for m in writer.in_doubt if m in rows]
        # Read through a surviving node other than the one the daemon publishes to.
        reader = next(node for node in cluster.nodes if node.name not in (victim, survivor))
        consumer = Consumer(reader, destination, credit=1000)
        deliveries = [m.id for m in consumer.receive_all(committed, timeout=60, settle=1.0)]

        lost = set(committed) - set(deliveries)
        assert not lost, f"{len(lost)} committed rows not in the queue, e.g. {sorted(lost)[:5]}\n{daemon.log()[-3000:]}"
        assert session_order_violations(deliveries, rows) == []
        duplicates = len(deliveries) - len(set(deliveries))
        # In flight on the lost connection: published again (the same message-id) through the next node.
        assert duplicates <= IN_FLIGHT, duplicates
        resumed_in = database.query("SELECT extract(epoch FROM min(dispatched_at) - to_timestamp(%s)) "
                                    "FROM outbox.messages WHERE created_at > to_timestamp(%s)",
                                    (killed_at, killed_at))[0][0]
        assert resumed_in < RECONNECT_MAX_MS / 1000 + 5, f"resumed {resumed_in:.1f} s after the kill"
        assert daemon.alive(), daemon.log()
        log = daemon.log()
        lost_at = log_time(log, f"broker connection lost ({victim})")
        reconnected_in = log_time(log, f"broker connected: connected to {survivor}") - lost_at
        print(f"broker failover: {len(committed)} rows committed, {len(writer.in_doubt)} in doubt, 0 lost, "
              f"{duplicates} duplicates, 0 order violations; {victim} killed, connected to {survivor} "
              f"{reconnected_in * 1000:.0f} ms after the loss, the first new row dispatched {resumed_in:.2f} s "
              f"after the kill")
    finally:
        writer.stopping.set()
        assert daemon.stop() == 0, daemon.log()
        if consumer is not None:
            consumer.close()
        database.drop()
