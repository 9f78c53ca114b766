"""Publishing only what a standby has: asynchronous replication falls behind, the primary dies, the standby is promoted.

The primary's WAL sender freezes (as in a network partition between the
servers) while a writer keeps committing, then the primary dies and its
standby is promoted: the rows committed during the freeze are gone. Without
database.wait_for_standby outboxd has published them already (phantoms:
messages whose rows, and the business state committed with them, no longer
exist). With it, a claimed row is published only once the standby has flushed
the WAL past it: no phantoms, and every row the new primary has is published
once the new primary has a standby of its own (until then it holds them).
"""

import os
import re
import signal
import time
import urllib.request

import psycopg2
import pytest

from harness import Broker, Consumer, Daemon, Database, free_port, run_cli, unique, wait_until, write_config
from pg_cluster import Cluster
from steady_writer import Writer, session_order_violations

FREEZE_S = 3


@pytest.fixture
def rabbitmq():
    return Broker("rabbitmq")


@pytest.fixture
def servers():
    """The primary, its standby, and a list the test adds later standbys to (all removed at the end)."""
    primary = Cluster.primary("primary").start()  # asynchronous: no synchronous_standby_names
    clusters = [primary]
    try:
        clusters.append(primary.standby("standby").start())
        yield clusters
    finally:
        for cluster in reversed(clusters):
            cluster.remove()


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


@pytest.mark.parametrize("wait_for_standby", ["none", "standby"])
def test_a_failover_after_replication_fell_behind(workdir, rabbitmq, servers, wait_for_standby):
    primary, standby = servers[0], servers[1]
    hosts = f"127.0.0.1:{primary.port},127.0.0.1:{standby.port}"
    database = Database(workdir, admin_url=f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write")
    queue = unique("standby")
    metrics_port = free_port()
    path = write_config(f"{workdir}/outboxd.yaml", database, rabbitmq,
                        database={"url": database.url, "reconnect_min_ms": 100, "reconnect_max_ms": 1000,
                                  "connect_timeout_ms": 2000, "wait_for_standby": wait_for_standby},
                        retention={"mode": "keep"}, http={"listen": f"127.0.0.1:{metrics_port}"})
    consumer = Consumer(rabbitmq, queue)
    daemon = Daemon(path).start()
    writer = Writer(f"{database.writer_url.partition('?')[0]}?target_session_attrs=read-write&connect_timeout=2", queue)
    walsender = None
    try:
        writer.start()
        wait_until(lambda: consumer.receive(1000, timeout=0.5) and len(consumer.received) > 200, timeout=30,
                   what="rows flowing with a healthy standby")
        waits = metric(metrics_port, "outboxd_standby_wait_seconds_count")
        waited = metric(metrics_port, "outboxd_standby_wait_seconds_sum")
        with psycopg2.connect(primary.url()) as conn, conn.cursor() as cur:
            cur.execute("SELECT pid FROM pg_stat_replication WHERE application_name = 'standby'")
            walsender = cur.fetchone()[0]
        os.kill(walsender, signal.SIGSTOP)
        frozen_at = len(writer.committed)
        time.sleep(FREEZE_S)
        during_freeze = len(writer.committed) - frozen_at
        # The primary dies; its frozen WAL sender with it (a stopped process ignores all but SIGKILL).
        stopping = primary.stop("immediate", wait=False)
        os.kill(walsender, signal.SIGKILL)
        stopping.wait(timeout=60)
        standby.promote()
        promoted_at = time.time()
        wait_until(lambda: any(at > promoted_at for _, at in writer.committed), timeout=30,
                   what="the writer committing on the new primary")
        if wait_for_standby != "none":
            # The new primary has no standby yet: nothing of it is published, and /metrics says so.
            wait_until(lambda: metric(metrics_port, "outboxd_standby_waiting_rows") > 0, timeout=30,
                       what="rows held while the new primary has no standby")
            status = run_cli("status", "-c", path).stdout
            assert "standby standby: does not report; outboxd publishes nothing" in status, status
            time.sleep(1)
            consumer.receive(10000, timeout=0.5)
            since_promotion = {m for m, at in writer.committed if at > promoted_at}
            early = since_promotion & {m.id for _, m in consumer.received}
            assert not early, f"{len(early)} rows of the new primary published before it had a standby"
            servers.append(standby.standby("standby").start())  # what the cluster manager does next
        time.sleep(2)
        writer.stop()

        def new_primary(sql):
            with psycopg2.connect(standby.url(database.name)) as conn, conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall()

        wait_until(lambda: new_primary("SELECT count(*) FROM outbox.messages WHERE status <> 'dispatched'")[0][0] == 0,
                   timeout=60, what=f"every row dispatched on the new primary\n{daemon.log()[-3000:]}")
        rows = dict(new_primary("SELECT message_id, session_id FROM outbox.messages"))
        received = consumer.receive_all(list(rows), timeout=60, settle=1.0)
        deliveries = [m.id for m in received]
        lost = set(rows) - set(deliveries)
        phantoms = set(deliveries) - set(rows)
        gone = [m for m, _ in writer.committed if m not in rows]  # committed, then lost with the old primary
        assert gone, "the freeze lost no commit: the test proves nothing"
        assert not lost, f"{len(lost)} rows of the new primary never published, e.g. {sorted(lost)[:5]}"
        assert session_order_violations([m for m in deliveries if m in rows], rows) == []
        assert daemon.alive(), daemon.log()
        mean_wait = f"{1000 * waited / waits:.2f} ms per claim over {waits:.0f} claims" if waits else "-"
        if wait_for_standby != "none":
            status = run_cli("status", "-c", path).stdout
            assert re.search(r"^standby standby: \d+ bytes of WAL behind the primary$", status, re.M), status
        print(f"wait_for_standby {wait_for_standby}: {during_freeze} commits during the {FREEZE_S} s freeze, "
              f"{len(gone)} lost by the failover, {len(phantoms)} of them published (phantoms); "
              f"standby wait before the freeze: {mean_wait}")
        if wait_for_standby == "none":
            assert phantoms, "without wait_for_standby the lost rows should have been published"
        else:
            assert not phantoms, f"{len(phantoms)} rows published that the new primary lacks: {sorted(phantoms)[:5]}"
    finally:
        if walsender is not None:
            try:
                os.kill(walsender, signal.SIGKILL)
            except ProcessLookupError:
                pass
        writer.stopping.set()
        assert daemon.stop() == 0, daemon.log()
        consumer.close()
        database.drop()
