"""Many outboxes in one daemon: a schema per tenant and a database per tenant, served within a fixed connection
budget, each row's message naming its outbox (RabbitMQ, least-privilege roles)."""

import re
import threading
import time
import urllib.request

import psycopg2
import pytest

from harness import (Broker, Consumer, Daemon, Database, documented_series, free_port, run_cli, unique, wait_until,
                     write_config)


@pytest.fixture
def broker():
    return Broker("rabbitmq")


def add_schema(database, schema):
    """Migrates another outbox schema into `database` (as the superuser) and grants its roles to the database's
    dispatcher and writer logins, as a tenant's DBA does."""
    path = f"{database.workdir}/{database.name}-{schema}-migrate.yaml"
    with open(path, "w") as f:
        f.write(f'database:\n  url: "{database.superuser_url}"\nbroker:\n  url: "amqp://127.0.0.1:5672"\n'
                f'outbox:\n  schema: "{schema}"\n  workflow_schema: "{schema}_wf"\n')
    run_cli("migrate", "-c", path)
    database._admin(f'GRANT "{schema}_dispatcher" TO "{database.dispatcher_role}"',
                    f'GRANT "{schema}_writer" TO "{database.writer_role}"')


def enqueue_in(database, schema, destination, message_ids):
    with database.writer() as conn, conn.cursor() as cur:
        for message_id in message_ids:
            cur.execute(f'SELECT "{schema}".enqueue(destination => %s, message_id => %s, body => %s)',
                        (destination, message_id, message_id.encode()))


def daemon_connections(*databases):
    """Connections the daemon's login roles hold now, across the cluster."""
    roles = [d.dispatcher_role for d in databases]
    return databases[0].query("SELECT count(*) FROM pg_stat_activity WHERE usename = ANY(%s)", (roles,))[0][0]


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return reply.read().decode()


class ConnectionWatch:
    """Samples the daemon's connections every 20 ms while it runs; `most` is the largest count seen."""

    def __init__(self, *databases):
        self.databases = databases
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            self.most = max(self.most, daemon_connections(*self.databases))
            time.sleep(0.02)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.most


def test_outboxes_of_schemas_and_databases_go_out_within_the_budget(workdir, database, broker):
    """Three schemas of one database and a second database, four connections at most: every row goes out once,
    named by its outbox; once all are idle, a row in one of them wakes it and goes out within a second."""
    other = Database(workdir)
    try:
        for schema in ("t_a", "t_b"):
            add_schema(database, schema)
        orders = unique("orders")
        consumer = Consumer(broker, orders)
        port = free_port()
        path = write_config(f"{workdir}/outboxd.yaml", database, broker, http={"listen": f"127.0.0.1:{port}"},
                            tenants={"max_connections": 4, "release_after_ms": 300, "idle_check_interval_ms": 500})
        with open(path, "a") as f:
            f.write("outboxes:\n"
                    "  - name: main\n"
                    "  - name: a\n    outbox: {schema: t_a, workflow_schema: t_a_wf}\n"
                    "  - name: b\n    outbox: {schema: t_b, workflow_schema: t_b_wf}\n"
                    f'  - name: other\n    database: {{url: "{other.url}"}}\n')
        tenants = {"main": (database, "outbox"), "a": (database, "t_a"), "b": (database, "t_b"),
                   "other": (other, "outbox")}
        for name, (db, schema) in tenants.items():
            enqueue_in(db, schema, orders, [f"{name}-{i}" for i in range(20)])
        watch = ConnectionWatch(database, other)
        daemon = Daemon(path).start()
        try:
            messages = consumer.receive(80, timeout=60)
            assert sorted((m.properties["outboxd_outbox"], m.id) for m in messages) == sorted(
                (name, f"{name}-{i}") for name in tenants for i in range(20))
            for name, (db, schema) in tenants.items():
                wait_until(lambda: db.query(f'SELECT count(*) FROM "{schema}".messages')[0][0] == 0,
                           what=f"{name}'s rows marked")
            # Every outbox lets go of its connection. The shared database has the one listener: its dormant
            # outboxes ask writers to NOTIFY, the other's not (a loaded machine takes a while to get there).
            def watching():
                return {name: db.query(f'SELECT count(*) FROM "{schema}".instances WHERE watching')[0][0]
                        for name, (db, schema) in tenants.items()}

            wait_until(lambda: watching() == {"main": 1, "a": 1, "b": 1, "other": 0}, timeout=30,
                       what="the shared database's outboxes dormant and listened")
            time.sleep(1)  # and the other's loop let go too
            started = time.monotonic()
            enqueue_in(database, "t_b", orders, ["b-late"])
            late = consumer.receive(1, timeout=10)[0]
            assert (late.id, late.properties["outboxd_outbox"]) == ("b-late", "b")
            assert time.monotonic() - started < 1.0
            # Counted as b's loop lets go of it again.
            def counted():
                text = scrape(port)
                return text if 'outboxd_outbox_dispatched_rows{outbox="b"} 21' in text else None

            text = wait_until(counted, timeout=10, what="b's 21 rows counted")
            served = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
            for name, kind in documented_series(many_outboxes=True).items():
                assert served.get(name) == kind, f"{name}: documented as {kind}, served as {served.get(name)}"
        finally:
            most = watch.stop()
            consumer.close()
            assert daemon.stop() == 0, daemon.log()
        assert 0 < most <= 4, f"the daemon held {most} connections"
        # Stopped, it leaves no registration that would have writers NOTIFY no one.
        for name, (db, schema) in tenants.items():
            assert db.query(f'SELECT count(*) FROM "{schema}".instances')[0][0] == 0, name
    finally:
        other.drop()
