"""Tenant databases and schemas copied from a migrated one, and what the tests of many outboxes measure."""

import os
import re
import subprocess
import threading
import time

import psycopg2

from harness import Database, run_cli


class Copies:
    """Databases made from a migrated one by CREATE DATABASE ... TEMPLATE (a copy takes a fraction of a second,
    a migration seconds). The group roles and the template's login roles are cluster-wide, so its two login
    roles reach every copy."""

    def __init__(self, template, count):
        self.template = template
        self.names = []
        try:
            for i in range(count):
                name = f"{template.name}_{i}"
                template._admin(f'CREATE DATABASE "{name}" TEMPLATE "{template.name}"')
                self.names.append(name)
        except BaseException:
            self.drop()
            raise

    def url(self, name, role):
        base = {"dispatcher": self.template.url, "writer": self.template.writer_url,
                "superuser": self.template.superuser_url}[role]
        return base.rpartition("/")[0] + "/" + name

    def outboxes_yaml(self):
        return "outboxes:\n" + "".join(f'  - name: {name}\n    database: {{url: "{self.url(name, "dispatcher")}"}}\n'
                                       for name in self.names)

    def count(self, name):
        conn = psycopg2.connect(self.url(name, "superuser"))
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM outbox.messages")
                return cur.fetchone()[0]
        finally:
            conn.close()

    def drop(self):
        for name in self.names:
            self.template._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.names = []


class SchemaCopies:
    """`count` outbox schemas (each with its workflow schema) in one new database, copied from one that
    `outboxd migrate` made: pg_dump of the two schemas, renamed, restored in batches by two psql sessions. A
    copy costs tens of milliseconds where a migration costs a third of a second; the content is the same,
    privileges included. Two login roles, as a platform's daemon and application have, hold every schema's
    group role; `catalog` names a table of (name, schema, workflow_schema) the dispatcher may read."""

    BATCH = 25  # schemas per transaction: a copy takes some 300 locks, max_locks_per_transaction is 64 x backends

    def __init__(self, workdir, count):
        self.database = Database(workdir, migrated=False)
        prefix = self.database.name
        self.names = [f"{prefix}_{i:04d}" for i in range(count)]
        self.dispatcher_role, self.writer_role = f"{prefix}_dispatcher", f"{prefix}_writer"
        self.catalog = "public.tenants"
        self._group_roles = []
        try:
            self._make(workdir, prefix)
        except BaseException:
            self.drop()
            raise

    def _make(self, workdir, prefix):
        template = f"{prefix}_tpl"
        path = os.path.join(workdir, f"{template}-migrate.yaml")
        with open(path, "w") as f:
            f.write(f'database:\n  url: "{self.database.superuser_url}"\nbroker:\n  url: "amqp://127.0.0.1:5672"\n'
                    f'outbox:\n  schema: "{template}"\n  workflow_schema: "{template}_wf"\n')
        run_cli("migrate", "-c", path)
        self._group_roles += [f"{template}_dispatcher", f"{template}_writer"]
        dump = subprocess.run(["pg_dump", "--no-owner", "--no-comments", "-n", template, "-n", f"{template}_wf",
                               "-d", self.database.superuser_url], check=True, capture_output=True, text=True).stdout
        settings = [line for line in dump.splitlines() if line.startswith(("SET ", "SELECT pg_catalog.set_config"))]
        body = "\n".join(line for line in dump.splitlines() if line not in settings)
        # The template's name is unique (a random database name), so a plain replacement renames exactly it.
        scripts = []
        for share in (self.names[0::2], self.names[1::2]):
            script = settings[:]
            for start in range(0, len(share), self.BATCH):
                script.append("BEGIN;")
                for name in share[start:start + self.BATCH]:
                    script += [f'CREATE ROLE "{name}_dispatcher" NOLOGIN;', f'CREATE ROLE "{name}_writer" NOLOGIN;',
                               re.sub(rf"\b{template}", name, body)]
                    self._group_roles += [f"{name}_dispatcher", f"{name}_writer"]
                script.append("COMMIT;")
            scripts.append(os.path.join(workdir, f"{template}-copies-{len(scripts)}.sql"))
            with open(scripts[-1], "w") as f:
                f.write("\n".join(script) + "\n")
        restores = [subprocess.Popen(["psql", "-q", "-X", "-v", "ON_ERROR_STOP=1", "-f", script,
                                      "-d", self.database.superuser_url],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for script in scripts]
        for restore in restores:
            _, errors = restore.communicate()
            if restore.returncode != 0:
                raise AssertionError(f"restoring schema copies failed: {errors[-2000:]}")
        groups = ", ".join(f'"{name}_dispatcher"' for name in self.names)
        writers = ", ".join(f'"{name}_writer"' for name in self.names)
        rows = ", ".join(f"('{name}', '{name}', '{name}_wf')" for name in self.names)
        self.database._admin(
            f'CREATE ROLE "{self.dispatcher_role}" LOGIN IN ROLE {groups}',
            f'CREATE ROLE "{self.writer_role}" LOGIN IN ROLE {writers}')
        with self.database.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {self.catalog} (name text PRIMARY KEY, schema text, workflow_schema text)")
            cur.execute(f"INSERT INTO {self.catalog} VALUES {rows}")
            cur.execute(f'GRANT SELECT ON {self.catalog} TO "{self.dispatcher_role}"')

    def url(self, role):
        return self.database._url({"dispatcher": self.dispatcher_role, "writer": self.writer_role}[role])

    def drop(self):
        roles = ", ".join(f'"{role}"' for role in [self.dispatcher_role, self.writer_role, *self._group_roles])
        self.database._admin(f'DROP DATABASE IF EXISTS "{self.database.name}" WITH (FORCE)',
                             f"DROP ROLE IF EXISTS {roles}")
        self._group_roles = []


class ConnectionWatch:
    """Samples the connections of the daemon's login role every 20 ms; `most` is the largest count seen."""

    def __init__(self, database, role):
        self.database, self.role = database, role
        self.most = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        conn = self.database.connect()
        try:
            with conn.cursor() as cur:
                while not self._stop.is_set():
                    cur.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (self.role,))
                    self.most = max(self.most, cur.fetchone()[0])
                    self.samples += 1
                    time.sleep(0.02)
        finally:
            conn.close()

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.most


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def enqueue(url, schema, destination, message_ids):
    """Rows through <schema>.enqueue() in one transaction, as an application writes them; returns the commit
    time."""
    conn = psycopg2.connect(url)
    try:
        with conn, conn.cursor() as cur:
            for message_id in message_ids:
                cur.execute(f'SELECT "{schema}".enqueue(destination => %s, message_id => %s, body => %s)',
                            (destination, message_id, message_id.encode()))
        return time.time()
    finally:
        conn.close()


def first_rows(consumer, names, write, timeout, pause):
    """One row at a time in each idle tenant of `names`: write(name, message_id) commits it and returns the
    commit time. Each row must reach `consumer` within `timeout`, named by its outbox; returns each one's
    seconds from commit to the consumer."""
    latencies = []
    for name in names:
        committed = write(name, f"{name}-late")
        got = [(m.id, m.properties["outboxd_outbox"]) for m in consumer.receive(1, timeout=timeout)]
        assert got == [(f"{name}-late", name)], f"{name}'s row: {got}"
        latencies.append(consumer.received[-1][0] - committed)
        time.sleep(pause)
    return latencies
