"""Many outboxes in one daemon at scale: 200 databases, a database per tenant, served within 32 connections
(RabbitMQ, least-privilege roles)."""

import statistics
import time

import psycopg2
import pytest

from harness import Broker, Consumer, Daemon, Database, unique, wait_until, write_config
from tenant_copies import ConnectionWatch, Copies, first_rows, percentile, rss_kib

TENANTS = 200
BUDGET = 32
# 200 databases checked every 3 s: about 70 connections a second, half of what two cores of the suite's
# cluster open (a database per tenant costs a connection per look; docs/operations.md says what intervals hold).
IDLE_CHECK_MS = 3000


@pytest.fixture
def broker():
    return Broker("rabbitmq")


def write_rows(url, destination, ids):
    """Rows written as an application does: the writer login role, one transaction; returns its commit time."""
    conn = psycopg2.connect(url)
    try:
        with conn, conn.cursor() as cur:
            cur.execute("INSERT INTO outbox.messages (message_id, destination, body) "
                        "SELECT id, %s, convert_to(id, 'UTF8') FROM unnest(%s::text[]) AS id", (destination, ids))
        return time.time()
    finally:
        conn.close()


def test_two_hundred_databases_within_thirty_two_connections(workdir, broker):
    """200 databases, one outbox each, 32 connections at most: every row goes out, named by its outbox; the
    daemon never holds more than 32 connections; once all are dormant a row in an idle one goes out within
    idle_check_interval + 1 s (p99); prints the figures and the daemon's RSS."""
    started_test = time.monotonic()
    template = Database(workdir)
    copies = None
    try:
        copies = Copies(template, TENANTS)
        made = time.monotonic() - started_test
        orders = unique("orders")
        consumer = Consumer(broker, orders, credit=1000)
        path = write_config(f"{workdir}/outboxd.yaml", template, broker,
                            tenants={"max_connections": BUDGET, "release_after_ms": 500,
                                     "idle_check_interval_ms": IDLE_CHECK_MS})
        with open(path, "a") as f:
            f.write("outboxes:\n")
            for name in copies.names:
                f.write(f'  - name: {name}\n    database: {{url: "{copies.url(name, "dispatcher")}"}}\n')
        expected = set()
        for name in copies.names:
            ids = [f"{name}-{i}" for i in range(3)]
            write_rows(copies.url(name, "writer"), orders, ids)
            expected |= {(name, i) for i in ids}
        watch = ConnectionWatch(template, template.dispatcher_role)
        daemon = Daemon(path)
        # The sanitizer's quarantine would keep freed memory in the process: RSS as without it.
        daemon.asan_options += ":quarantine_size_mb=0"
        daemon.start()
        try:
            began = time.monotonic()
            messages = consumer.receive_all([i for _, i in expected], timeout=180)
            drained = time.monotonic() - began
            got = sorted((m.properties["outboxd_outbox"], m.id) for m in messages)
            assert got == sorted(expected), f"{len(got)} of {len(expected)} received"
            for name in copies.names:
                wait_until(lambda name=name: copies.count(name) == 0,
                           what=f"{name}'s rows marked")
            # Every outbox lets go of its connection (release_after_ms 500) and is checked once more.
            time.sleep(3)
            # How often the idle outboxes are checked: each check of a database is a session of its own.
            before = _sessions(template, copies.names)
            time.sleep(5)
            checks_per_second = (_sessions(template, copies.names) - before) / 5
            latencies = first_rows(consumer, copies.names[::TENANTS // 20],
                                   lambda name, i: write_rows(copies.url(name, "writer"), orders, [i]), 15, 0.3)
            rss = rss_kib(daemon.process.pid)
        finally:
            most = watch.stop()
            consumer.close()
            code = daemon.stop(timeout=60)
        p50, p99 = statistics.median(latencies), percentile(latencies, 99)
        print(f"\n{TENANTS} databases made in {made:.1f} s; drained {len(expected)} rows in {drained:.1f} s; "
              f"most connections {most} ({watch.samples} samples); idle wake-up p50 {p50 * 1000:.0f} ms "
              f"p99 {p99 * 1000:.0f} ms max {max(latencies) * 1000:.0f} ms; VmRSS {rss / 1024:.1f} MiB "
              f"(Debug+ASan); idle: {checks_per_second:.0f} sessions/s across {TENANTS} databases; "
              f"test {time.monotonic() - started_test:.1f} s")
        assert code == 0, daemon.log()[-5000:]
        assert 0 < most <= BUDGET, f"the daemon held {most} connections"
        assert p99 <= IDLE_CHECK_MS / 1000 + 1.0, f"idle wake-up p99 {p99:.3f} s: {latencies}"
    finally:
        if copies is not None:
            copies.drop()
        template.drop()


def _sessions(template, names):
    """Sessions ever opened on these databases (pg_stat_database.sessions; the stats may lag up to ~0.5 s)."""
    return template.query("SELECT coalesce(sum(sessions), 0) FROM pg_stat_database WHERE datname = ANY(%s)",
                          (names,))[0][0]
