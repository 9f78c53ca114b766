"""`outboxd console` of a many-outbox file: the outboxes ranked by backlog, each outbox's pages under /o/<name>/.

Two outboxes are schemas of one database, a third has a database of its own, and a fourth names a database
that does not exist (its name hostile HTML), and so does a fifth: the console lists them as unreachable and serves
the others.
"""

import json
import re
import time
from urllib.parse import quote, urlparse, urlunparse

import psycopg2
import pytest

import harness
from console_client import TOKEN, Console, write_token
from harness import require_env, run_cli, unique
from test_many_outboxes import Tenants  # the databases, catalog and file of those tests

HOSTILE_DATABASE = '<img src=x onerror="alert(1)">'


def url_of(admin_url, dbname):
    return urlunparse(urlparse(admin_url)._replace(path="/" + quote(dbname, safe="")))


def admin(statement, dbname=None, params=None):
    """One statement as the superuser, on the cluster's own database or on `dbname`; its rows."""
    admin_url = require_env("OUTBOXD_TEST_PG_URL")
    conn = psycopg2.connect(url_of(admin_url, dbname) if dbname else admin_url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(statement, params)
        rows = cur.fetchall() if cur.description else None
    conn.close()
    return rows


def console_connections(databases):
    """The console's connections to `databases`, the test's own: other tests' consoles may run beside it."""
    return admin("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'outboxd console' "
                 "AND datname = ANY(%s)", params=(list(databases),))[0][0]


class Outboxes:
    """Two databases (acme and globex in `shared`, remote alone) and a config listing them and a missing one."""

    def __init__(self, workdir):
        self.admin_url = require_env("OUTBOXD_TEST_PG_URL")
        tag = unique("co")
        self.shared, self.remote = f"{tag}_shared", f"{tag}_remote"
        for name in (self.shared, self.remote):
            admin(f'CREATE DATABASE "{name}"')
        self.user = urlparse(self.admin_url).username
        self.path = f"{workdir}/outboxd.yaml"
        with open(self.path, "w") as f:
            f.write(f'database:\n  url: "{url_of(self.admin_url, self.shared)}"\n'
                    'broker:\n  url: "amqp://127.0.0.1:1"\n'
                    f'console:\n  token_file: "{write_token(workdir)}"\n  sample_interval_ms: 10000\n'
                    "outboxes:\n"
                    "  - name: acme\n    outbox: {schema: acme, workflow_schema: acme_workflow}\n"
                    "  - name: globex\n    outbox: {schema: globex, workflow_schema: globex_workflow}\n"
                    f'  - name: remote\n    database: {{url: "{url_of(self.admin_url, self.remote)}"}}\n')
        run_cli("migrate", "-c", self.path)
        with open(self.path, "a") as f:
            for name in ("gone", "gone_too"):  # a database of two outboxes, tried once a round
                f.write(f'  - name: {name}\n    database: {{url: "{url_of(self.admin_url, HOSTILE_DATABASE)}"}}\n'
                        f"    outbox: {{schema: {name}, workflow_schema: {name}_workflow}}\n")

    def enqueue(self, dbname, schema, message_id, parked=False):
        admin(f"SELECT {schema}.enqueue(destination => 'orders', message_id => '{message_id}', body => 'x'::text)",
                   dbname)
        if parked:
            admin(f"UPDATE {schema}.messages SET status = 'parked', attempts = 1, last_error = 'refused', "
                       f"first_failed_at = now(), last_failed_at = now() WHERE message_id = '{message_id}'", dbname)

    def status_of(self, dbname, schema, message_id):
        return admin(f"SELECT status FROM {schema}.messages WHERE message_id = '{message_id}'", dbname)

    def drop(self):
        for name in (self.shared, self.remote):
            admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def outboxes(workdir):
    o = Outboxes(workdir)
    yield o
    harness.stop_leftovers()
    o.drop()


def bearer():
    return {"Authorization": f"Bearer {TOKEN}"}


def listed(console, wanted):
    """The list of outboxes once it shows `wanted` (name: ready rows, None for not read)."""
    def read():
        status, _, body = console.request("GET", "/api/status", headers=bearer())
        assert status == 200, body
        document = json.loads(body)
        shown = {o["name"]: o.get("ready") for o in document["outboxes"]}
        return document if shown == wanted else None
    return harness.wait_until(read, timeout=30, what=f"the list to show {wanted}")


def test_the_list_ranks_outboxes_by_backlog_and_shows_an_unreachable_one(workdir, outboxes):
    for i in range(3):
        outboxes.enqueue(outboxes.shared, "globex", f"g{i}")
    outboxes.enqueue(outboxes.remote, "outbox", "r0")
    outboxes.enqueue(outboxes.shared, "acme", "a0", parked=True)
    console = Console(outboxes.path, workdir)

    document = listed(console, {"gone": None, "gone_too": None, "globex": 3, "remote": 1, "acme": 0})
    assert [o["name"] for o in document["outboxes"]] == ["gone", "gone_too", "globex", "remote", "acme"], document
    by_name = {o["name"]: o for o in document["outboxes"]}
    for name in ("gone", "gone_too"):
        assert by_name[name]["state"] == "unreachable" and "cannot connect to" in by_name[name]["reason"]
    assert by_name["acme"]["parked"] == 1 and by_name["globex"]["schema"] == "globex"
    assert by_name["remote"]["database"].endswith(f"/{outboxes.remote}"), by_name["remote"]
    assert by_name["globex"]["oldest_ready_age_ms"] >= 0
    assert "password" not in json.dumps(document)

    cookie, _ = console.login(page="/")
    status, headers, page = console.request("GET", "/", headers={"Cookie": cookie})
    assert status == 200 and headers["content-security-policy"].startswith("default-src 'none'")
    assert '<a href="/o/globex/">globex</a>' in page
    assert page.index("/o/globex/") < page.index("/o/remote/") < page.index("/o/acme/")
    # The database's name is hostile HTML: escaped wherever it shows.
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "<img" not in page and "<script" not in page

    # The console holds one connection per database: acme and globex share theirs.
    assert console_connections([outboxes.shared, outboxes.remote]) <= 2
    assert console.stop() == 0


def test_an_outboxs_pages_are_under_its_name_and_an_action_touches_no_other(workdir, outboxes):
    outboxes.enqueue(outboxes.shared, "acme", "p1", parked=True)
    outboxes.enqueue(outboxes.shared, "globex", "p1", parked=True)
    console = Console(outboxes.path, workdir)
    cookie, csrf = console.login("alice <ops>", page="/")

    status, _, page = console.request("GET", "/o/acme/parked", headers={"Cookie": cookie})
    assert status == 200
    assert "outbox acme" in page and 'action="/o/acme/parked/p1/skip"' in page
    assert '<a href="/">All outboxes</a>' in page and "alice &lt;ops&gt;" in page
    status, _, page = console.request("GET", "/o/globex/", headers={"Cookie": cookie})
    assert status == 200 and "outbox globex" in page and "<svg" in page

    # Without the CSRF token: refused, nothing changed.
    status, _, _ = console.request("POST", "/o/acme/parked/p1/skip", headers={"Cookie": cookie}, form={})
    assert status == 403
    assert outboxes.status_of(outboxes.shared, "acme", "p1") == [("parked",)]

    status, headers, _ = console.request("POST", "/o/acme/parked/p1/skip", headers={"Cookie": cookie},
                                         form={"csrf": csrf, "writer": outboxes.user})
    assert status == 303 and headers["location"] == "/o/acme/parked"
    assert outboxes.status_of(outboxes.shared, "acme", "p1") == [("cancelled",)]
    assert outboxes.status_of(outboxes.shared, "globex", "p1") == [("parked",)]
    assert admin("SELECT os_user FROM acme.row_events WHERE message_id = 'p1' AND action = 'skipped'",
                          outboxes.shared) == [("console:alice <ops>",)]

    # The API of one outbox, with the bearer token.
    status, _, body = console.request("GET", "/o/globex/api/parked", headers=bearer())
    assert status == 200 and [r["message_id"] for r in json.loads(body)["rows"]] == ["p1"]
    assert "alice" in console.request("GET", "/o/acme/audit", headers={"Cookie": cookie})[2]


def test_an_unknown_or_hostile_outbox_name_answers_404_escaped_and_401_first(workdir, outboxes):
    console = Console(outboxes.path, workdir)
    hostile = "/o/" + quote("<img src=x onerror=alert(1)>", safe="") + "/parked"
    for path in ["/o/nope/", "/o/nope/parked", hostile]:
        assert console.request("GET", path)[0] == 401, path  # who asks is checked before what
        status, headers, body = console.request("GET", path, headers=bearer() | {"Accept": "text/html"})
        assert status == 404, (path, status)
        assert "<img" not in body and "default-src 'none'" in headers["content-security-policy"]
    _, _, body = console.request("GET", hostile, headers=bearer() | {"Accept": "text/html"})
    assert "no outbox is named &quot;&lt;img src=x onerror=alert(1)&gt;&quot;" in body
    status, _, body = console.request("GET", "/o/nope/api/status", headers=bearer())
    assert status == 404 and json.loads(body)["error"] == 'no outbox is named "nope"'
    # The pages of one outbox are not served at / when there are many.
    assert console.request("GET", "/parked", headers=bearer())[0] == 404
    assert console.request("POST", "/o/nope/parked/p1/skip", headers=bearer(), form={})[0] == 404


def test_with_outbox_the_console_serves_that_one_at_the_root_as_before(workdir, outboxes):
    outboxes.enqueue(outboxes.shared, "globex", "g0")
    console = Console(outboxes.path, workdir, extra=["--outbox", "globex"])
    status, _, body = console.request("GET", "/api/status", headers=bearer())
    assert status == 200 and json.loads(body)["total"]["pending"] == 1, body
    assert console.request("GET", "/o/globex/", headers=bearer())[0] == 404
    _, _, page = console.request("GET", "/parked", headers=bearer() | {"Accept": "text/html"})
    assert "All outboxes" not in page and re.search(r'<a href="/parked">Parked</a>', page)


def test_many_databases_cost_a_few_connections(workdir):
    """Six databases, none migrated: each is read (and fails) in turn, and the console keeps 4 connections open."""
    admin_url = require_env("OUTBOXD_TEST_PG_URL")
    tag = unique("cn")
    names = [f"{tag}_{i}" for i in range(6)]
    for name in names:
        admin(f'CREATE DATABASE "{name}"')
    try:
        path = f"{workdir}/many.yaml"
        with open(path, "w") as f:
            f.write(f'database:\n  url: "{admin_url}"\nbroker:\n  url: "amqp://127.0.0.1:1"\n'
                    f'console:\n  token_file: "{write_token(workdir)}"\n  sample_interval_ms: 1000\noutboxes:\n')
            for i, name in enumerate(names):
                f.write(f'  - name: o{i}\n    database: {{url: "{url_of(admin_url, name)}"}}\n')
        console = Console(path, workdir)

        def all_failed():
            document = json.loads(console.request("GET", "/api/status", headers=bearer())[2])
            return all(o["state"] == "failed" for o in document["outboxes"])
        harness.wait_until(all_failed, timeout=30, what="every outbox read")
        most = 0
        for _ in range(30):  # over three rounds of the sampler
            most = max(most, console_connections(names))
            time.sleep(0.1)
        # 4 kept between uses, and the one the sampler is using.
        assert 1 <= most <= 5, most
        assert console.stop() == 0
    finally:
        harness.stop_leftovers()
        for name in names:
            admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_catalogs_outboxes_are_listed_beside_the_lists(workdir):
    """The file of test_many_outboxes: one listed outbox and four of a catalog (its bad row left out)."""
    tenants = Tenants(workdir)
    try:
        run_cli("migrate", "-c", tenants.config(None, "migrate.yaml"))
        path = tenants.config(None, "console.yaml")
        with open(path, "a") as f:
            f.write(f'console:\n  token_file: "{write_token(workdir)}"\n')
        tenants.query(tenants.shared, "SELECT initech.enqueue(destination => 'orders', message_id => 'i0', "
                                      "body => 'x'::text)")
        console = Console(path, workdir)
        document = listed(console, {"initech": 1, "acme": 0, "globex": 0, "listed": 0, "remote": 0})
        assert [o["name"] for o in document["outboxes"]] == ["initech", "acme", "globex", "listed", "remote"]
        assert "bad name" in console.log() and "bad name" not in json.dumps(document)
        assert console.request("GET", "/o/remote/parked", headers=bearer())[0] == 200
        assert console.stop() == 0
    finally:
        harness.stop_leftovers()
        tenants.drop()
