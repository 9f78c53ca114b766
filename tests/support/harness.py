"""Black-box test harness: scratch databases, outboxd processes, AMQP consumers.

Services come from the environment written by scripts/services.sh
(OUTBOXD_TEST_PG_URL, OUTBOXD_TEST_RABBITMQ_URL, ...). Every test gets its own
database (migrated with `outboxd migrate`) and its own queue names, so tests
can run side by side against the same servers.
"""

import os
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


def require_env(name):
    value = os.environ.get(name)
    if not value:
        if REQUIRED:
            pytest.fail(f"{name} is not set (OUTBOXD_REQUIRE_SERVICES=1)")
        pytest.skip(f"{name} is not set: start scripts/services.sh and source its env file")
    return value


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
    """A fresh database migrated by `outboxd migrate`."""

    def __init__(self, workdir):
        admin_url = require_env("OUTBOXD_TEST_PG_URL")
        self.name = unique("t")
        admin = psycopg2.connect(admin_url)
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{self.name}"')
        admin.close()
        parsed = urlparse(admin_url)
        self.url = urlunparse(parsed._replace(path=f"/{self.name}"))
        self.admin_url = admin_url
        self.workdir = workdir

    def connect(self, autocommit=True):
        conn = psycopg2.connect(self.url)
        conn.autocommit = autocommit
        return conn

    def query(self, sql, params=None):
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else None

    def drop(self):
        admin = psycopg2.connect(self.admin_url)
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        admin.close()


def write_config(path, database, broker, /, **sections):
    """Writes an outboxd YAML config; `sections` override keys, e.g. dispatch={"max_attempts": 3}."""
    doc = {
        "database": {"url": database.url},
        "broker": {"url": broker.url, "profile": broker.profile},
        "log": {"level": "debug" if os.environ.get("OUTBOXD_TEST_DEBUG") else "info"},
    }
    if broker.user:
        doc["broker"].update(username=broker.user, password=broker.password)
    for section, values in sections.items():
        doc.setdefault(section, {}).update(values)
    lines = []
    for section, values in doc.items():
        lines.append(f"{section}:")
        for key, value in values.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, str):
                value = '"' + value.replace('"', '\\"') + '"'
            lines.append(f"  {key}: {value}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


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

    def start(self):
        log = open(self.log_path, "a")
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0")
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


def enqueue(cur, destination, message_id, body, **columns):
    """Calls outbox.enqueue with named parameters; returns the row id."""
    names = ["destination", "message_id", "body", *columns]
    values = [destination, message_id, body, *columns.values()]
    placeholders = ", ".join(f"{n} => %s" for n in names)
    cur.execute(f"SELECT outbox.enqueue({placeholders})", values)
    return cur.fetchone()[0]


def wait_until(predicate, timeout=30.0, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


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
