"""`outboxd console` for tests: the process on a free port, and requests to it without following redirects."""

import http.client
import os
import re
import signal
import subprocess
import urllib.parse

import pytest

import harness
from harness import Broker, Daemon, Database, enqueue, wait_parked, write_config

TOKEN = "test-token-0123456789abcdef"
# A row over this is parked at once, never sent: the quickest real parked row.
MAX_MESSAGE_BYTES = 16384


class Console:
    """An `outboxd console` process on a free port of `host` (reached on loopback), its log in `workdir`."""

    def __init__(self, config_path, workdir, host="127.0.0.1", extra=()):
        self.port = harness.free_port()
        self.log_path = os.path.join(workdir, "console.log")
        log = open(self.log_path, "a")
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0")
        self.process = subprocess.Popen([harness.OUTBOXD, "console", "-c", config_path, "--listen",
                                         f"{host}:{self.port}", *extra], stdout=log, stderr=log, env=env)
        harness._started.append(self.process)
        log.close()
        harness.wait_until(self._answers, timeout=30, what="the console to answer")

    def _answers(self):
        if self.process.poll() is not None:
            raise AssertionError(f"console exited {self.process.returncode}:\n{self.log()}")
        try:
            return self.request("GET", "/login")[0] == 200
        except OSError:
            return False

    def request(self, method, path, headers=None, form=None):
        """(status, headers as a dict of lower-case names, body text); redirects are returned, not followed."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        body = None
        headers = dict(headers or {})
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        result = (response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode())
        connection.close()
        return result

    def login(self, name="alice", page="/parked"):
        """A browser login: (cookie header value, the CSRF token of its forms, read from `page`)."""
        status, headers, _ = self.request("POST", "/login", form={"token": TOKEN, "name": name})
        assert status == 303, status
        cookie = headers["set-cookie"].split(";")[0]
        _, _, shown = self.request("GET", page, headers={"Cookie": cookie})
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', shown).group(1)
        return cookie, csrf

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)

    def log(self):
        with open(self.log_path) as f:
            return f.read()


def write_token(workdir):
    path = os.path.join(workdir, "console.token")
    with open(path, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(path, 0o600)
    return path


def wait_event(database, message_id, action, timeout=30):
    """The row_events rows (db_role, os_user) of `action` on `message_id`, once there is one."""
    return harness.wait_until(lambda: database.query(
        "SELECT db_role, os_user FROM outbox.row_events WHERE message_id = %s AND action = %s ORDER BY id",
        (message_id, action)), timeout=timeout, what=f"a {action} event of {message_id}")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """One database, one `outboxd run` and one console for the module; each test parks rows of its own."""
    workdir = str(tmp_path_factory.mktemp("console"))
    database = Database(workdir)
    config = f"{workdir}/outboxd.yaml"
    write_config(config, database, Broker("rabbitmq"), dispatch={"max_message_bytes": MAX_MESSAGE_BYTES},
                 console={"token_file": write_token(workdir), "sample_interval_ms": 1000})
    daemon = Daemon(config).start()
    console = Console(config, workdir)
    try:
        yield database, console, config
    finally:
        console.stop()
        daemon.stop()
        harness.stop_leftovers()
        database.drop()


def park(database, session, message_id, waiting=None):
    """A row too large to send, parked at once; `waiting`, a small row of its session, waits behind it."""
    with database.writer() as conn, conn.cursor() as cur:
        enqueue(cur, "console-orders", message_id, b"x" * (MAX_MESSAGE_BYTES + 1), session_id=session)
        if waiting:
            enqueue(cur, "console-orders", waiting, b"small", session_id=session)
    wait_parked(database, message_id)
