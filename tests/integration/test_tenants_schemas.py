"""Many outboxes in one daemon, a schema per tenant: 200 outbox schemas of one database, named by a catalog
query, served within 4 connections; an idle tenant's first row goes out within a second (RabbitMQ,
least-privilege roles). bench/tenants.sh runs the same at 1,000 schemas."""

import statistics
import time

import pytest

from harness import Broker, Consumer, Daemon, Target, unique, wait_until, write_config
from tenant_copies import ConnectionWatch, SchemaCopies, enqueue, first_rows, percentile, rss_kib

TENANTS = 200
BUDGET = 4


@pytest.fixture
def broker():
    return Broker("rabbitmq")


def test_two_hundred_schemas_within_four_connections(workdir, broker):
    """Every schema's row goes out, named by its outbox; the daemon never holds more than 4 connections; once
    all are dormant, a row in an idle schema goes out within 1 s (p99; NOTIFY wakes it, one listener hears
    every schema of the database)."""
    started_test = time.monotonic()
    copies = SchemaCopies(workdir, TENANTS)
    try:
        made = time.monotonic() - started_test
        orders = unique("orders")
        consumer = Consumer(broker, orders, credit=1000)
        path = write_config(f"{workdir}/outboxd.yaml", Target(copies.url("dispatcher")), broker,
                            tenants={"max_connections": BUDGET, "release_after_ms": 500,
                                     "catalog": {"query": f"SELECT name, schema, workflow_schema FROM {copies.catalog}"}})
        for name in copies.names:
            enqueue(copies.url("writer"), name, orders, [f"{name}-first"])
        watch = ConnectionWatch(copies.database, copies.dispatcher_role)
        daemon = Daemon(path)
        daemon.asan_options += ":quarantine_size_mb=0"  # RSS as without the sanitizer's quarantine
        daemon.start()
        try:
            expected = sorted((name, f"{name}-first") for name in copies.names)
            messages = consumer.receive_all([i for _, i in expected], timeout=120)
            got = sorted((m.properties["outboxd_outbox"], m.id) for m in messages)
            assert got == expected, f"{len(got)} of {len(expected)} received"
            wait_until(lambda: _unsent(copies) == 0, what="every schema's row marked")
            time.sleep(2)  # every served outbox lets go (release_after_ms 500) and is dormant, its watch row back
            latencies = first_rows(consumer, copies.names[::TENANTS // 40],
                                   lambda name, i: enqueue(copies.url("writer"), name, orders, [i]), 10, 0.2)
            rss = rss_kib(daemon.process.pid)
        finally:
            most = watch.stop()
            consumer.close()
            code = daemon.stop(timeout=60)
        p50, p99 = statistics.median(latencies), percentile(latencies, 99)
        print(f"\n{TENANTS} schemas made in {made:.1f} s; most connections {most} ({watch.samples} samples); "
              f"idle first row p50 {p50 * 1000:.0f} ms p99 {p99 * 1000:.0f} ms; VmRSS {rss / 1024:.1f} MiB; "
              f"test {time.monotonic() - started_test:.1f} s")
        assert code == 0, daemon.log()[-5000:]
        assert 0 < most <= BUDGET, f"the daemon held {most} connections"
        assert p99 <= 1.0, f"idle first row p99 {p99:.3f} s: {latencies}"
    finally:
        copies.drop()


def _unsent(copies):
    with copies.database.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT sum(n) FROM (" + " UNION ALL ".join(
            f'SELECT count(*) AS n FROM "{name}".messages' for name in copies.names) + ") AS counts")
        return cur.fetchone()[0]
