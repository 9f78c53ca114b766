"""Many outboxes in one file: migrate and status across a list and a catalog, and the commands of one outbox.

Three outboxes are schemas of one database, two more have a database each: one of those is listed in
outboxes:, the others come from a catalog table in a database of its own, read by a role that may only
SELECT it. The catalog stores where each outbox is; each config's query adds its own login role to the
url (docs/operations.md, "Many outboxes in one daemon"). migrate runs as the superuser, everything else
as one login role holding each outbox's <schema>_dispatcher.
"""

import json
import re
from urllib.parse import urlparse, urlunparse

import psycopg2
import pytest

from harness import require_env, run_cli, unique

NO_BROKER = "amqp://127.0.0.1:1"  # the commands never connect to it
SHARED = ("acme", "globex", "initech")  # the schemas of the shared database


def admin(*statements, dbname=None):
    """Statements as the superuser, on the cluster's own database or on `dbname`."""
    url = require_env("OUTBOXD_TEST_PG_URL")
    conn = psycopg2.connect(url_of(url, None, dbname) if dbname else url)
    conn.autocommit = True
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
    conn.close()


def url_of(admin_url, role, dbname):
    """The cluster's URL as `role` (None: the superuser's) on `dbname`."""
    parsed = urlparse(admin_url)
    netloc = parsed.netloc if role is None else f"{role}@{parsed.netloc.rpartition('@')[2]}"
    return urlunparse(parsed._replace(netloc=netloc, path=f"/{dbname}"))


class Tenants:
    """The databases, the catalog and the roles of one test; dropped at its end."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.admin_url = require_env("OUTBOXD_TEST_PG_URL")
        self.tag = unique("m")
        self.shared, self.listed, self.remote, self.catalog = (f"{self.tag}_{part}"
                                                               for part in ("shared", "listed", "remote", "catalog"))
        self.reader, self.dispatcher = f"{self.tag}_reader", f"{self.tag}_dispatcher"
        self.databases = [self.shared, self.listed, self.remote, self.catalog]
        for name in self.databases:
            admin(f'CREATE DATABASE "{name}"')
        admin(f'CREATE ROLE "{self.reader}" LOGIN')
        admin("CREATE TABLE tenants (name text PRIMARY KEY, dbname text, schema text, workflow_schema text, "
              "active boolean NOT NULL DEFAULT true)",
              f'GRANT SELECT ON tenants TO "{self.reader}"', dbname=self.catalog)
        rows = [(schema, None, schema, f"{schema}_workflow") for schema in SHARED]
        rows += [("remote", self.remote, None, None), ("bad name", self.remote, "bad", None)]
        self.add_rows(rows)

    def add_rows(self, rows):
        with psycopg2.connect(url_of(self.admin_url, None, self.catalog)) as conn, conn.cursor() as cur:
            cur.executemany("INSERT INTO tenants (name, dbname, schema, workflow_schema) VALUES (%s, %s, %s, %s)",
                            rows)
        conn.close()

    def config(self, role, name="outboxd.yaml"):
        """A many-outbox config whose outboxes connect as `role` (None: the superuser)."""
        hostport = urlparse(self.admin_url).netloc.rpartition("@")[2]
        user = role or urlparse(self.admin_url).username
        # The catalog holds where an outbox is; this config's query adds who connects.
        query = ("SELECT name, CASE WHEN dbname IS NOT NULL "
                 f"THEN format('postgresql://%s@{hostport}/%s', '{user}', dbname) END AS url, "
                 "schema, workflow_schema FROM tenants WHERE active ORDER BY name")
        path = f"{self.workdir}/{name}"
        with open(path, "w") as f:
            f.write(f'database:\n  url: "{url_of(self.admin_url, role, self.shared)}"\n'
                    f'broker:\n  url: "{NO_BROKER}"\n'
                    "outboxes:\n"
                    "  - name: listed\n"
                    f'    database: {{url: "{url_of(self.admin_url, role, self.listed)}"}}\n'
                    "tenants:\n  catalog:\n"
                    f'    query: "{query}"\n'
                    f'    database: {{url: "{url_of(self.admin_url, self.reader, self.catalog)}"}}\n')
        return path

    def grant_dispatcher(self):
        groups = ", ".join(f'"{schema}_dispatcher"' for schema in (*SHARED, "outbox"))
        admin(f'CREATE ROLE "{self.dispatcher}" LOGIN IN ROLE {groups}')

    def query(self, dbname, sql):
        with psycopg2.connect(url_of(self.admin_url, None, dbname)) as conn, conn.cursor() as cur:
            cur.execute(sql)
            rows = cur.fetchall() if cur.description else None
        conn.close()
        return rows

    def drop(self):
        for name in self.databases:
            admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin(f'DROP ROLE IF EXISTS "{self.reader}"', f'DROP ROLE IF EXISTS "{self.dispatcher}"')


@pytest.fixture
def tenants(workdir):
    t = Tenants(workdir)
    yield t
    t.drop()


def names_in(output):
    return [line.split()[1] for line in output.splitlines() if line.startswith("outbox ")]


def test_migrate_and_status_go_through_the_list_and_the_catalog(workdir, tenants):
    migrated = run_cli("migrate", "-c", tenants.config(None, "migrate.yaml"))
    out = migrated.stdout
    assert names_in(out) == ["listed", "acme", "globex", "initech", "remote"], out
    version = max(int(v) for v in re.findall(r"-> (\d+)", out))
    assert out.count(f"version 0 -> {version}") == 5, out
    assert out.rstrip().endswith("migrate: 5 of 5 outboxes migrated"), out
    # The bad row is said and left out; the others are migrated all the same.
    assert 'catalog row 2: name must be 1 to 63 characters of A-Z, a-z, 0-9, _, . and -, got "bad name"' \
        in migrated.stderr, migrated.stderr
    assert tenants.query(tenants.shared, "SELECT count(*) FROM pg_namespace WHERE nspname IN "
                                         "('acme', 'globex', 'initech', 'acme_workflow')") == [(4,)]

    again = run_cli("migrate", "-c", tenants.config(None, "migrate.yaml")).stdout
    assert again.count(f"is up to date at version {version}; nothing to do") == 5, again

    tenants.grant_dispatcher()
    config = tenants.config(tenants.dispatcher)
    for i in range(3):
        tenants.query(tenants.shared, f"SELECT globex.enqueue(destination => 'orders', message_id => 'g{i}', "
                                      "body => 'x'::text)")

    report = json.loads(run_cli("status", "--json", "-c", config).stdout)
    outboxes = report["outboxes"]
    assert sorted(outboxes) == ["acme", "globex", "initech", "listed", "remote"], report
    assert report["complete"] is True
    assert all(o["state"] == "ok" for o in outboxes.values()), report
    assert outboxes["globex"]["total"]["pending"] == 3 and outboxes["acme"]["total"]["pending"] == 0, report
    assert outboxes["globex"]["schema"] == "globex"
    assert outboxes["remote"]["database"].endswith(f"/{tenants.remote}"), outboxes["remote"]

    text = run_cli("status", "-c", config).stdout
    assert names_in(text) == ["listed", "acme", "globex", "initech", "remote"], text
    assert text.count("(total)") == 5, text

    # --outbox: exactly what status prints for a file of that one outbox.
    one = json.loads(run_cli("status", "--json", "--outbox", "globex", "-c", config).stdout)
    assert one["total"]["pending"] == 3 and "outboxes" not in one, one
    assert json.loads(run_cli("status", "--json", "--outbox", "listed", "-c", config).stdout)["total"]["pending"] == 0


def test_an_outbox_not_migrated_is_said_and_the_others_still_shown(workdir, tenants):
    run_cli("migrate", "-c", tenants.config(None, "migrate.yaml"))
    tenants.grant_dispatcher()
    tenants.add_rows([("fresh", tenants.remote, "fresh", "fresh_workflow")])
    config = tenants.config(tenants.dispatcher)

    status = run_cli("status", "--json", "-c", config, check=False)
    assert status.returncode == 1, status
    outboxes = json.loads(status.stdout)["outboxes"]
    assert outboxes["fresh"]["state"] == "not_migrated", outboxes["fresh"]
    assert "schema fresh has no outbox: run outboxd migrate" in outboxes["fresh"]["reason"]
    assert sorted(name for name, o in outboxes.items() if o["state"] == "ok") == \
        ["acme", "globex", "initech", "listed", "remote"], outboxes

    text = run_cli("status", "-c", config, check=False).stdout
    assert "outbox fresh (" in text and "): not_migrated: schema fresh has no outbox" in text, text
    assert text.count("(total)") == 5, text

    # One outbox alone, by name; then every one is shown.
    only = run_cli("migrate", "--outbox", "fresh", "-c", tenants.config(None, "migrate.yaml")).stdout
    assert "to schema fresh: version 0 -> " in only and "outbox " not in only, only
    admin(f'GRANT fresh_dispatcher TO "{tenants.dispatcher}"')
    assert run_cli("status", "-c", config).returncode == 0


def test_an_unreachable_catalog_leaves_the_list_and_fails(workdir, tenants):
    run_cli("migrate", "-c", tenants.config(None, "migrate.yaml"))
    tenants.grant_dispatcher()
    config = tenants.config(tenants.dispatcher)
    admin(f'REVOKE SELECT ON tenants FROM "{tenants.reader}"', dbname=tenants.catalog)
    status = run_cli("status", "--json", "-c", config, check=False)
    assert status.returncode == 1
    report = json.loads(status.stdout)
    assert list(report["outboxes"]) == ["listed"] and report["complete"] is False, report
    assert "catalog query: " in status.stderr and "permission denied" in status.stderr, status.stderr
    assert "the catalog could not be read: its outboxes are left out" in status.stderr


def test_the_catalog_query_runs_read_only(workdir, tenants):
    path = tenants.config(None, "writes.yaml")
    with open(path) as f:
        text = f.read()
    start = text.index('    query: "') + len('    query: "')
    text = text[:start] + "DELETE FROM tenants RETURNING name" + text[text.index('"\n', start):]
    with open(path, "w") as f:
        f.write(text)
    refused = run_cli("migrate", "-c", path, check=False)
    assert refused.returncode == 1 and "catalog query: " in refused.stderr, refused.stderr
    assert tenants.query(tenants.catalog, "SELECT count(*) FROM tenants") == [(5,)]


def test_commands_of_one_outbox_take_outbox_with_many_and_refuse_it_with_one(workdir, tenants):
    run_cli("migrate", "-c", tenants.config(None, "migrate.yaml"))
    tenants.grant_dispatcher()
    config = tenants.config(tenants.dispatcher)

    for args in (["parked"], ["show", "m1"], ["requeue", "--all-parked"], ["timeline", "s"], ["statements"]):
        refused = run_cli(*args, "-c", config, check=False)
        assert refused.returncode == 2, (args, refused)
        assert "has many outboxes: name one with --outbox NAME (listed, acme, globex, initech, remote)" \
            in refused.stderr, refused.stderr
    unknown = run_cli("parked", "--outbox", "nope", "-c", config, check=False)
    assert unknown.returncode == 2 and 'no outbox is named "nope"' in unknown.stderr, unknown.stderr

    parked = json.loads(run_cli("parked", "--json", "--outbox", "remote", "-c", config).stdout)
    assert parked["rows"] == [] and parked["matched"] == 0, parked
    statements = run_cli("statements", "--outbox", "globex", "-c", config).stdout
    assert "-- outboxd.globex.claim_immediate" in statements and '"globex".leases' in statements, statements

    checked = run_cli("check-config", "-c", config).stdout
    assert checked.startswith("ok: 1 outbox listed and more from a catalog, broker amqp://127.0.0.1:1"), checked
    assert f"  outbox listed: {tenants.dispatcher}@" in checked and f"/{tenants.listed}, schema outbox" in checked
    assert "  catalog: " in checked and "  tenants: max_connections 16" in checked, checked

    single = f"{workdir}/single.yaml"
    with open(single, "w") as f:
        f.write(f'database:\n  url: "{url_of(tenants.admin_url, tenants.dispatcher, tenants.listed)}"\n'
                f'broker:\n  url: "{NO_BROKER}"\n')
    refused = run_cli("status", "--outbox", "listed", "-c", single, check=False)
    assert refused.returncode == 2 and "--outbox is for a file with many outboxes" in refused.stderr, refused.stderr
    assert "(total)" in run_cli("status", "-c", single).stdout
