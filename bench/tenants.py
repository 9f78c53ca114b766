#!/usr/bin/env python3
"""Many outboxes in one daemon: the connections it holds, how fast an idle tenant's first row goes out, its
memory, with a schema or a database per tenant.

    bench/tenants.py --build build-release --schemas 1000 --budget 4
    bench/tenants.py --build build-release --databases 1000 --budget 32 --idle-check-ms 10000

Makes the tenants (schemas restored from a renamed dump of a migrated one; databases copied from a migrated
template), writes one row in every tenant at once (the burst: first rows of all tenants out), waits until
every outbox is dormant again, then writes one row at a time in idle tenants spread over the set (the
probes) and times each from commit to the consumer. Prints one line of figures. Uses the services of
scripts/services.sh (bench/tenants.sh starts them)."""

import argparse
import os
import statistics
import sys
import tempfile
import time

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
tenants = parser.add_mutually_exclusive_group(required=True)
tenants.add_argument("--schemas", type=int, help="outbox schemas in one database")
tenants.add_argument("--databases", type=int, help="databases of one outbox each")
parser.add_argument("--build", default="build-release", help="build directory of the outboxd binary")
parser.add_argument("--budget", type=int, default=4, help="tenants.max_connections")
parser.add_argument("--idle-check-ms", type=int, default=5000, help="tenants.idle_check_interval_ms")
parser.add_argument("--probes", type=int, default=100, help="idle tenants written one at a time")
parser.add_argument("--settle", type=float, default=15.0, help="seconds between the burst and the probes")
args = parser.parse_args()

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
os.environ["OUTBOXD_BIN"] = os.path.join(root, args.build, "daemon", "outboxd")
sys.path.insert(0, os.path.join(root, "tests", "support"))
from harness import Broker, Consumer, Daemon, Database, Target, unique, write_config  # noqa: E402
from tenant_copies import ConnectionWatch, Copies, SchemaCopies, enqueue, first_rows, percentile, rss_kib  # noqa: E402


class SchemaTenants:
    def __init__(self, workdir, count):
        self.copies = SchemaCopies(workdir, count)
        self.names = self.copies.names
        self.database, self.role = self.copies.database, self.copies.dispatcher_role

    def config(self, path, broker, tenants_section):
        query = f"SELECT name, schema, workflow_schema FROM {self.copies.catalog}"
        return write_config(path, Target(self.copies.url("dispatcher")), broker,
                            tenants={**tenants_section, "catalog": {"query": query}})

    def write(self, name, destination, message_id):
        return enqueue(self.copies.url("writer"), name, destination, [message_id])

    def drop(self):
        self.copies.drop()


class DatabaseTenants:
    def __init__(self, workdir, count):
        self.database = Database(workdir)
        self.copies = Copies(self.database, count)
        self.names = self.copies.names
        self.role = self.database.dispatcher_role

    def config(self, path, broker, tenants_section):
        path = write_config(path, self.database, broker, tenants=tenants_section)
        with open(path, "a") as f:
            f.write(self.copies.outboxes_yaml())
        return path

    def write(self, name, destination, message_id):
        return enqueue(self.copies.url(name, "writer"), "outbox", destination, [message_id])

    def drop(self):
        self.copies.drop()
        self.database.drop()


def sessions(database):
    """Backends ever started in this cluster's databases (pg_stat_database; the stats lag up to ~0.5 s)."""
    return database.query("SELECT coalesce(sum(sessions), 0) FROM pg_stat_database")[0][0]


def main():
    workdir = tempfile.mkdtemp(prefix="outboxd-tenants-")
    began = time.monotonic()
    kind, count = ("schemas", args.schemas) if args.schemas else ("databases", args.databases)
    tenants = (SchemaTenants if args.schemas else DatabaseTenants)(workdir, count)
    made = time.monotonic() - began
    broker = Broker("rabbitmq")
    destination = unique("tenants")
    consumer = Consumer(broker, destination, credit=2000)
    path = tenants.config(os.path.join(workdir, "outboxd.yaml"), broker,
                          {"max_connections": args.budget, "idle_check_interval_ms": args.idle_check_ms,
                           "release_after_ms": 1000})
    daemon = Daemon(path)
    watch = ConnectionWatch(tenants.database, tenants.role)
    daemon.start()
    try:
        time.sleep(2)
        burst_began = time.time()
        for name in tenants.names:
            tenants.write(name, destination, f"{name}-burst")
        received = consumer.receive(count, timeout=600)
        if len(received) != count:
            raise SystemExit(f"burst: {len(received)} of {count} received")
        burst = consumer.received[-1][0] - burst_began
        time.sleep(args.settle)  # every outbox dormant again, its next checks spread
        idle_sessions = sessions(tenants.database)
        time.sleep(10)
        looks_per_second = (sessions(tenants.database) - idle_sessions) / 10
        step = max(1, count // args.probes)
        latencies = first_rows(consumer, tenants.names[::step][:args.probes],
                               lambda name, i: tenants.write(name, destination, i), args.idle_check_ms / 1000 + 30,
                               0.25)
        rss = rss_kib(daemon.process.pid)
    finally:
        most = watch.stop()
        consumer.close()
        code = daemon.stop(timeout=120)
        tenants.drop()
    print(f"{count} {kind}, max_connections {args.budget}, idle_check_interval_ms {args.idle_check_ms}: "
          f"made in {made:.0f} s; most connections {most} ({watch.samples} samples); burst of one row in each: "
          f"out in {burst:.1f} s; idle first row ({len(latencies)} probes) p50 {statistics.median(latencies) * 1000:.0f} "
          f"ms p99 {percentile(latencies, 99) * 1000:.0f} ms max {max(latencies) * 1000:.0f} ms; "
          f"idle cluster sessions/s {looks_per_second:.0f}; VmRSS {rss / 1024:.1f} MiB; daemon exit {code}")


if __name__ == "__main__":
    main()
