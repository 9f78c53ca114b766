"""What the client-library tests share: a writer login role, the JMS consumer built by Maven, npm packages."""

import atexit
import os
import shutil
import subprocess
import tempfile
from urllib.parse import urlparse, urlunparse

import psycopg2

from harness import require_env, unique

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
JMS_DIR = os.path.join(ROOT, "tests", "clients", "jms")
NODE_DIR = os.path.join(ROOT, "tests", "clients", "node")

_built = {}


def _scratch(name):
    path = tempfile.mkdtemp(prefix=f"outboxd-{name}-")
    atexit.register(shutil.rmtree, path, True)
    return path


class Writer:
    """A login role holding only outbox_writer in `database` (migrated already), as an application has."""

    def __init__(self, database):
        self.role = unique("app")
        self.admin_url = require_env("OUTBOXD_TEST_PG_URL")
        self._admin(f'CREATE ROLE "{self.role}" LOGIN IN ROLE outbox_writer')
        parsed = urlparse(self.admin_url)
        self.url = urlunparse(parsed._replace(netloc=f"{self.role}@{parsed.hostname}:{parsed.port}",
                                              path=f"/{database.name}"))

    def connect(self, autocommit=True):
        conn = psycopg2.connect(self.url)
        conn.autocommit = autocommit
        return conn

    def drop(self):
        self._admin(f'DROP ROLE IF EXISTS "{self.role}"')

    def _admin(self, sql):
        admin = psycopg2.connect(self.admin_url)
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(sql)
        admin.close()


def jms_classpath():
    """Builds tests/clients/jms with Maven once per test run (artifacts from Maven Central, cached in ~/.m2)."""
    if "jms" not in _built:
        out = _scratch("jms")
        built = subprocess.run(["mvn", "-q", "-B", f"-Dbuild.dir={out}", "compile"], cwd=JMS_DIR,
                               capture_output=True, text=True, timeout=600)
        assert built.returncode == 0, f"mvn compile failed:\n{built.stdout}{built.stderr}"
        with open(os.path.join(out, "classpath.txt")) as f:
            _built["jms"] = os.path.join(out, "classes") + os.pathsep + f.read().strip()
    return _built["jms"]


def node_modules():
    """`npm ci` of tests/clients/node into a scratch dir once per test run; returns its node_modules for NODE_PATH."""
    if "node" not in _built:
        out = _scratch("node")
        for name in ("package.json", "package-lock.json"):
            shutil.copy(os.path.join(NODE_DIR, name), out)
        installed = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=out, capture_output=True, text=True,
                                   timeout=600)
        assert installed.returncode == 0, f"npm ci failed:\n{installed.stdout}{installed.stderr}"
        _built["node"] = os.path.join(out, "node_modules")
    return _built["node"]
