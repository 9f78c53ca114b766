"""PostgreSQL failover: a streaming standby is promoted while a writer commits; the daemon follows by itself.

The daemon and the writer name both servers in one multi-host URL with
target_session_attrs=read-write, as an HA deployment does; replication is
synchronous, so every commit a writer saw is on the standby when the primary
dies. Nothing committed may be lost, no row may be published that the new
primary does not have, each session keeps its order, and the daemon resumes
on the new primary without a restart.
"""

import time

import psycopg2
import pytest

from harness import Broker, Consumer, Daemon, Database, unique, wait_until, write_config
from pg_cluster import Cluster
from steady_writer import Writer, session_order_violations

RECONNECT_MAX_MS = 1000


@pytest.fixture
def rabbitmq():
    return Broker("rabbitmq")


@pytest.fixture
def servers():
    primary = Cluster.primary("primary", synchronous_standby_names="standby").start()
    standby = None
    try:
        standby = primary.standby("standby").start()
        yield primary, standby
    finally:
        for cluster in (standby, primary):
            if cluster is not None:
                cluster.remove()


def test_daemon_follows_a_promoted_standby(workdir, rabbitmq, servers):
    primary, standby = servers
    hosts = f"127.0.0.1:{primary.port},127.0.0.1:{standby.port}"
    database = Database(workdir, admin_url=f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write")
    queue = unique("failover")
    path = write_config(f"{workdir}/outboxd.yaml", database, rabbitmq,
                        database={"url": database.url, "reconnect_min_ms": 100,
                                  "reconnect_max_ms": RECONNECT_MAX_MS, "connect_timeout_ms": 2000},
                        retention={"mode": "keep"})
    consumer = Consumer(rabbitmq, queue)
    daemon = Daemon(path).start()
    writer = Writer(f"{database.writer_url.partition('?')[0]}?target_session_attrs=read-write&connect_timeout=2", queue)
    try:
        writer.start()
        wait_until(lambda: consumer.receive(1000, timeout=0.5) and len(consumer.received) > 200, timeout=30,
                   what="rows flowing before the failover")
        primary.kill()
        time.sleep(1)  # as long as a cluster manager takes to decide
        standby.promote()
        promoted_at = time.time()
        wait_until(lambda: any(at > promoted_at for _, at in writer.committed), timeout=30,
                   what="the writer committing on the new primary")
        time.sleep(3)
        writer.stopping.set()
        writer.join(timeout=30)

        def new_primary(sql, params=None):
            with psycopg2.connect(standby.url(database.name)) as conn, conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()

        wait_until(lambda: new_primary("SELECT count(*) FROM outbox.messages WHERE status <> 'dispatched'")[0][0] == 0,
                   timeout=60, what=f"every row dispatched on the new primary\n{daemon.log()[-3000:]}")
        rows = dict(new_primary("SELECT message_id, session_id FROM outbox.messages"))
        leased, owners, partitions = new_primary("SELECT count(*) FILTER (WHERE owner IS NOT NULL), "
                                                 "count(DISTINCT owner), count(*) FROM outbox.leases")[0]
        instances = new_primary("SELECT count(*) FROM outbox.instances")[0][0]
        # A commit that ended with the connection counts once the new primary has its row.
        committed = [message_id for message_id, _ in writer.committed] + [m for m in writer.in_doubt if m in rows]
        received = consumer.receive_all(committed, timeout=60, settle=1.0)
        deliveries = [m.id for m in received]

        lost = set(committed) - set(deliveries)
        phantoms = set(deliveries) - set(rows)
        assert not lost, f"{len(lost)} committed rows never published, e.g. {sorted(lost)[:5]}\n{daemon.log()[-3000:]}"
        assert not phantoms, f"{len(phantoms)} rows published that the new primary lacks: {sorted(phantoms)[:5]}"
        assert session_order_violations(deliveries, rows) == []
        duplicates = len(deliveries) - len(set(deliveries))
        # At least once: a row sent before the kill whose mark died with the primary goes again;
        # at most the rows in flight then (dispatch.in_flight).
        assert duplicates <= 1000, duplicates

        # The first mark on the new primary of a row committed after the promotion (one clock: the server's).
        resumed_in = new_primary("SELECT extract(epoch FROM min(dispatched_at) - to_timestamp(%s)) FROM outbox.messages "
                                 "WHERE created_at > to_timestamp(%s)", (promoted_at, promoted_at))[0][0]
        assert resumed_in < RECONNECT_MAX_MS / 1000 + 5, f"resumed {resumed_in:.1f} s after the promotion"
        assert (leased, owners, instances) == (partitions, 1, 1), (leased, owners, partitions, instances)
        assert daemon.alive(), daemon.log()
        print(f"failover: {len(committed)} rows committed, {len(writer.in_doubt)} in doubt, "
              f"{duplicates} duplicates, resumed {resumed_in:.2f} s after the promotion")
    finally:
        writer.stopping.set()
        assert daemon.stop() == 0, daemon.log()
        consumer.close()
        database.drop()
