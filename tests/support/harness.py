"""Black-box test harness: scratch databases, outboxd processes, AMQP consumers.

Services come from the environment written by scripts/services.sh
(OUTBOXD_TEST_PG_URL, OUTBOXD_TEST_RABBITMQ_URL, ...). Every test gets its own
database (migrated with `outboxd migrate`), its own login roles and its own
queue names, so tests can run side by side against the same servers. outboxd
connects as a role holding only the dispatcher group role, applications' rows
are written by one holding only the writer group role, as deployed.
"""

import os
import re
import signal
import subprocess
import tempfile
import time
import uuid
from urllib.parse import urlparse, urlunparse

import psycopg2
import pytest
from proton import Message, Terminus
from proton.reactor import ReceiverOption
from proton.utils import BlockingConnection

OUTBOXD = os.environ.get("OUTBOXD_BIN", "build/daemon/outboxd")
REQUIRED = os.environ.get("OUTBOXD_REQUIRE_SERVICES") == "1"


def require_env(name, remedy="start scripts/services.sh and source its env file"):
    value = os.environ.get(name)
    if not value:
        if REQUIRED:
            pytest.fail(f"{name} is not set (OUTBOXD_REQUIRE_SERVICES=1): {remedy}")
        pytest.skip(f"{name} is not set: {remedy}")
    return value


def rabbitmqctl(*args):
    """rabbitmqctl against the node of scripts/services.sh (its env names the script and the scratch dir)."""
    script = require_env("OUTBOXD_SERVICES_SH")
    return subprocess.run([script, "rabbitmqctl", *args], capture_output=True, text=True, check=True, timeout=120,
                          env=dict(os.environ, OUTBOXD_SCRATCH=require_env("OUTBOXD_SCRATCH"))).stdout


def rabbitmq_has_queue(name):
    """Whether RabbitMQ's vhost / has queue `name`. Looked up by name, not listed: a listing fails whole
    once any queue's name is not UTF-8 (RabbitMQ 3.x stores an AMQP 1.0 address with an é in Latin-1)."""
    codes = ",".join(str(byte) for byte in name.encode())
    lookup = f'rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, list_to_binary([{codes}])))'
    return rabbitmqctl("eval", f"element(1, {lookup}).").strip() == "ok"


def unique(prefix):
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


class Broker:
    """One broker under test: URL, credentials and the profile outboxd uses for it."""

    def __init__(self, name):
        self.name = name
        self.profile = {"rabbitmq": "rabbitmq", "artemis": "artemis"}[name]
        upper = name.upper()
        self.url = require_env(f"OUTBOXD_TEST_{upper}_URL")
        self.user = os.environ.get(f"OUTBOXD_TEST_{upper}_USER", "")
        self.password = os.environ.get(f"OUTBOXD_TEST_{upper}_PASSWORD", "")

    def address(self, destination):
        """The address a consumer reads `destination` from, as the profile maps it."""
        return f"/queue/{destination}" if self.profile == "rabbitmq" else destination

    def connect(self, timeout=10):
        parsed = urlparse(self.url)
        kwargs = {"timeout": timeout}
        if self.user:
            kwargs.update(user=self.user, password=self.password, allowed_mechs="PLAIN")
        else:
            kwargs.update(allowed_mechs="ANONYMOUS")
        return BlockingConnection(f"{parsed.hostname}:{parsed.port}", **kwargs)


class DurableSource(ReceiverOption):
    """Attach with a durable source so RabbitMQ declares the queue as outboxd's durable target does."""

    def apply(self, receiver):
        receiver.source.durability = Terminus.DELIVERIES
        # Artemis: read the anycast queue of that name (ignored by RabbitMQ).
        receiver.source.capabilities.put_symbol("queue")


class Consumer:
    """Reads every message of one destination; records arrival times."""

    def __init__(self, broker, destination, credit=500):
        self.broker = broker
        self.connection = broker.connect()
        self.receiver = self.connection.create_receiver(
            broker.address(destination), credit=credit, options=DurableSource())
        self.received = []  # (arrival time, proton.Message)

    def receive(self, count, timeout=30.0):
        """Waits until `count` more messages arrived or `timeout` passed; returns the new ones."""
        start = len(self.received)
        deadline = time.monotonic() + timeout
        while len(self.received) - start < count:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                message = self.receiver.receive(timeout=min(left, 1.0))
            except Exception:  # proton.Timeout: keep waiting until the deadline
                continue
            self.received.append((time.time(), message))
            self.receiver.accept()
        return [m for _, m in self.received[start:]]

    def receive_all(self, ids, timeout=120.0, settle=0.5):
        """Receives until every id in `ids` arrived (then `settle` s more for stragglers); returns all received."""
        missing = set(ids) - {m.id for _, m in self.received}
        deadline = time.monotonic() + timeout
        while missing and time.monotonic() < deadline:
            for message in self.receive(min(len(missing), 1000), timeout=min(5.0, deadline - time.monotonic())):
                missing.discard(message.id)
        self.receive(10 ** 9, timeout=settle)
        return [m for _, m in self.received]

    def quiet_for(self, seconds):
        """Asserts nothing arrives for `seconds`; returns what did arrive."""
        return self.receive(1, timeout=seconds)

    def close(self):
        try:
            self.connection.close()
        except Exception:  # closing after a broker restart may fail; nothing to keep
            pass


class Database:
    """A fresh database, migrated by `outboxd migrate` as the superuser, with two login roles
    made for it as the README deploys them: one holding only <schema>_dispatcher, for the
    daemon and the CLI, and one holding only <schema>_writer, for the application.

    url            the dispatcher login role's URL: write_config() gives it to outboxd
    writer_url     the writer login role's URL: writer() connects with it; tests write rows there
    superuser_url  the superuser's URL: connect() and query(), for set-up and assertions

    add_writer() makes another login role holding only <schema>_writer, a second application.

    With migrated=False (fixture unmigrated_database) the database is left empty for tests
    of `outboxd migrate`, and url is the superuser's: migrate needs one that may create schemas.
    admin_url names another cluster than the shared one (a multi-host URL names every node).
    """

    def __init__(self, workdir, schema="outbox", migrated=True, admin_url=None):
        self.admin_url = admin_url or require_env("OUTBOXD_TEST_PG_URL")  # the cluster's superuser
        self.name = unique("t")
        self.schema = schema
        self.dispatcher_role = f"{self.name}_dispatcher"
        self.writer_role = f"{self.name}_writer"
        self.other_writers = []  # add_writer()'s roles, dropped with the database
        self.workdir = workdir
        self._admin(f'CREATE DATABASE "{self.name}"')
        self.superuser_url = self._url(None)
        if not migrated:
            # For tests of migrate itself, which needs a role that may create schemas.
            self.url = self.writer_url = self.superuser_url
            return
        self.url = self._url(self.dispatcher_role)
        self.writer_url = self._url(self.writer_role)
        try:
            self._migrate()
            # Roles are cluster-wide: each database gets its own, dropped with it.
            self._admin(f'CREATE ROLE "{self.dispatcher_role}" LOGIN IN ROLE "{schema}_dispatcher"',
                        f'CREATE ROLE "{self.writer_role}" LOGIN IN ROLE "{schema}_writer"')
        except BaseException:
            self.drop()
            raise

    def _url(self, role):
        """The cluster's URL pointed at this database, as `role` (None: as the superuser)."""
        parsed = urlparse(self.admin_url)
        netloc = parsed.netloc if role is None else f"{role}@{parsed.netloc.rpartition('@')[2]}"
        return urlunparse(parsed._replace(netloc=netloc, path=f"/{self.name}"))

    def _admin(self, *statements):
        admin = psycopg2.connect(self.admin_url)
        admin.autocommit = True
        with admin.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
        admin.close()

    def _migrate(self):
        """`outboxd migrate` as the superuser: it creates schemas and the group roles."""
        path = os.path.join(self.workdir, f"{self.name}-migrate.yaml")
        with open(path, "w") as f:
            # migrate never connects to the broker, but the config requires one.
            f.write(f'database:\n  url: "{self.superuser_url}"\nbroker:\n  url: "amqp://127.0.0.1:5672"\n'
                    f'outbox:\n  schema: "{self.schema}"\n')
        run_cli("migrate", "-c", path)

    def connect(self, autocommit=True):
        """A superuser connection: set-up and assertions."""
        conn = psycopg2.connect(self.superuser_url)
        conn.autocommit = autocommit
        return conn

    def add_writer(self, label):
        """Another login role holding only <schema>_writer, as a second application has; returns its name."""
        role = f"{self.name}_{label}"
        self._admin(f'CREATE ROLE "{role}" LOGIN IN ROLE "{self.schema}_writer"')
        self.other_writers.append(role)
        return role

    def writer(self, autocommit=True, role=None):
        """A connection of the writer login role (or of `role`, from add_writer()), as an application has."""
        conn = psycopg2.connect(self.writer_url if role is None else self._url(role))
        conn.autocommit = autocommit
        return conn

    def query(self, sql, params=None):
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else None

    def drop(self):
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)',
                    f'DROP ROLE IF EXISTS "{self.dispatcher_role}"',
                    f'DROP ROLE IF EXISTS "{self.writer_role}"',
                    *(f'DROP ROLE IF EXISTS "{role}"' for role in self.other_writers))


class Target:
    """A database URL alone, for write_config() where no Database is made (other clusters, bad URLs)."""

    def __init__(self, url):
        self.url = url


class NoBroker:
    """A broker nothing listens on: the daemon only retries it, so the database decides what happens."""

    url = "amqp://127.0.0.1:1"
    profile = "generic"
    user = ""
    password = ""


def write_config(path, database, broker, /, **sections):
    """Writes an outboxd YAML config; `sections` override keys, e.g. dispatch={"max_attempts": 3}."""
    doc = {
        "database": {"url": database.url},  # the dispatcher login role, as deployed
        "broker": {"url": broker.url, "profile": broker.profile},
        "log": {"level": "debug" if os.environ.get("OUTBOXD_TEST_DEBUG") else "info"},
    }
    if broker.user:
        doc["broker"].update(username=broker.user, password=broker.password)
    if getattr(database, "schema", "outbox") != "outbox":
        doc["outbox"] = {"schema": database.schema}
    for section, values in sections.items():
        if isinstance(values, list):
            doc[section] = values  # a list section (destinations, outboxes)
        else:
            doc.setdefault(section, {}).update(values)
    if "urls" in doc["broker"]:
        del doc["broker"]["url"]  # the nodes of a cluster instead of one broker: exactly one of the two
    with open(path, "w") as f:
        f.write("\n".join(yaml_lines(doc)) + "\n")
    return path


def yaml_value(value):
    """A scalar, a list or a mapping in YAML flow style."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(yaml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {yaml_value(item)}" for key, item in value.items()) + "}"
    return str(value)


def yaml_lines(mapping, indent=""):
    """A mapping as YAML block lines; nested mappings (broker.cloudevents) nest."""
    lines = []
    for key, value in mapping.items():
        if isinstance(value, dict):
            lines += [f"{indent}{key}:", *yaml_lines(value, indent + "  ")]
        else:
            lines.append(f"{indent}{key}: {yaml_value(value)}")
    return lines


METRICS_MD = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "metrics.md")


def documented_series(many_outboxes=False):
    """{name: type} from the tables of docs/metrics.md: a daemon of one outbox's, or of many outboxes'."""
    with open(METRICS_MD) as f:
        one, _, many = f.read().partition("\n## Many outboxes\n")
    text = many.partition("\n## ")[0] if many_outboxes else one
    return {name: kind for name, kind in re.findall(r"^\| `(outboxd_[a-z_]+)[^`]*` \| (\w+) \|", text, re.M)}


def run_cli(*args, check=True):
    result = subprocess.run([OUTBOXD, *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"outboxd {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


# Processes a test started; the workdir fixture stops whatever a failed test left running.
_started = []


def stop_leftovers():
    while _started:
        process = _started.pop()
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


class Daemon:
    """An `outboxd run` process with its log in a file."""

    def __init__(self, config_path, name="outboxd"):
        self.config_path = config_path
        self.log_path = os.path.join(os.path.dirname(config_path), f"{name}.log")
        self.process = None
        # For a sanitized build; a test of memory use adds quarantine_size_mb=0,
        # so that freed memory leaves the process as it would without the sanitizer.
        self.asan_options = "detect_leaks=1:abort_on_error=0"

    def start(self):
        log = open(self.log_path, "a")
        env = dict(os.environ, ASAN_OPTIONS=self.asan_options)
        self.process = subprocess.Popen([OUTBOXD, "run", "-c", self.config_path], stdout=log, stderr=log, env=env)
        _started.append(self.process)
        log.close()
        return self

    def signal(self, sig):
        self.process.send_signal(sig)

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, timeout=30):
        """SIGTERM and wait; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def alive(self):
        return self.process is not None and self.process.poll() is None


@pytest.fixture
def workdir():
    with tempfile.TemporaryDirectory(prefix="outboxd-test-") as d:
        try:
            yield d
        finally:
            stop_leftovers()


@pytest.fixture
def database(workdir):
    db = Database(workdir)
    yield db
    db.drop()


@pytest.fixture
def unmigrated_database(workdir):
    db = Database(workdir, migrated=False)
    yield db
    db.drop()


def enqueue(cur, destination, message_id, body, **columns):
    """Calls outbox.enqueue with named parameters; returns the row id."""
    names = ["destination", "message_id", "body", *columns]
    values = [destination, message_id, body, *columns.values()]
    placeholders = ", ".join(f"{n} => %s" for n in names)
    cur.execute(f"SELECT outbox.enqueue({placeholders})", values)
    return cur.fetchone()[0]


def pending_of(database, destination):
    """Pending rows of one destination."""
    return database.query("SELECT count(*) FROM outbox.messages WHERE destination = %s AND status = 'pending'",
                          (destination,))[0][0]


def wait_until(predicate, timeout=30.0, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def wait_parked(database, message_id, timeout=30.0):
    """Waits until the row of `message_id` is parked; returns [(attempts, last_error)]."""
    return wait_until(lambda: database.query(
        "SELECT attempts, last_error FROM outbox.messages WHERE message_id = %s AND status = 'parked'",
        (message_id,)), timeout=timeout, what=f"{message_id} parked")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Peer:
    """The scripted AMQP peer (tests/support/amqp_peer.py) as a broker for outboxd."""

    profile = "generic"
    user = ""
    password = ""

    def __init__(self, workdir, *script):
        self.port = free_port()
        self.url = f"amqp://127.0.0.1:{self.port}"
        self.log_path = os.path.join(workdir, f"peer-{self.port}.jsonl")
        peer = os.path.join(os.path.dirname(__file__), "amqp_peer.py")
        self.process = subprocess.Popen(["/usr/bin/python3", peer, "--port", str(self.port), "--log", self.log_path,
                                         *script])
        _started.append(self.process)
        wait_until(self._listening, timeout=10, what="AMQP peer listening")

    def _listening(self):
        import socket
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def deliveries(self):
        import json
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)
