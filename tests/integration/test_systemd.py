"""outboxd under systemd's notify protocol, as the service manager sees it: READY, WATCHDOG, RELOADING, STOPPING, STATUS."""

import os
import signal
import socket
import threading
import time

import pytest

from harness import Broker, Daemon, free_port, run_cli, wait_until, write_config

# The watchdog interval the tests announce (WATCHDOG_USEC): pings are due every 3.2 s.
WATCHDOG_S = 6.4
# Short enough for that watchdog: 500 ms + 2 s (connect_timeout as libpq applies it: whole
# seconds, at least 2) <= 40% of 6.4 s.
FAST_DATABASE = {"statement_timeout_ms": 500, "connect_timeout_ms": 100, "reconnect_min_ms": 100,
                 "reconnect_max_ms": 500}


class NotifySocket:
    """The service manager's end of NOTIFY_SOCKET: records every datagram with its arrival time."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.1)
        self.lines = []  # (monotonic time, "KEY=value")
        self.lock = threading.Lock()
        self.done = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while not self.done:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            now = time.monotonic()
            with self.lock:
                self.lines.extend((now, line) for line in data.decode().split("\n") if line)

    def seen(self, predicate, after=0.0):
        with self.lock:
            return [(t, line) for t, line in self.lines if t > after and predicate(line)]

    def times(self, line, after=0.0):
        return [t for t, _ in self.seen(lambda seen: seen == line, after)]

    def statuses(self, after=0.0):
        return [line[len("STATUS="):] for _, line in self.seen(lambda seen: seen.startswith("STATUS="), after)]

    def wait_for(self, line, after=0.0, timeout=30.0):
        """The arrival time of the first `line` after `after`."""
        return wait_until(lambda: (self.times(line, after) or [None])[0], timeout=timeout, what=line)

    def wait_for_status(self, prefix, after=0.0, timeout=30.0):
        found = wait_until(lambda: self.seen(lambda line: line.startswith("STATUS=" + prefix), after),
                           timeout=timeout, what=f"STATUS={prefix}")
        return found[0][0]

    def close(self):
        self.done = True
        self.thread.join(timeout=5)
        self.sock.close()


class TcpRelay:
    """Listens on a port and relays each connection to `target`: a broker that appears when the test says so."""

    def __init__(self, port, target):
        self.target = target
        self.server = socket.create_server(("127.0.0.1", port))
        self.server.settimeout(0.1)
        self.done = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.done:
            try:
                client, _ = self.server.accept()
            except socket.timeout:
                continue
            upstream = socket.create_connection(self.target)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.done = True
        self.thread.join(timeout=5)
        self.server.close()


@pytest.fixture
def broker():
    return Broker("rabbitmq")


@pytest.fixture
def notify(workdir, monkeypatch):
    """NOTIFY_SOCKET and WATCHDOG_USEC as systemd sets them; no WATCHDOG_PID, which sd_watchdog_enabled allows."""
    listener = NotifySocket(os.path.join(workdir, "notify.sock"))
    monkeypatch.setenv("NOTIFY_SOCKET", listener.path)
    monkeypatch.setenv("WATCHDOG_USEC", str(int(WATCHDOG_S * 1_000_000)))
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    yield listener
    listener.close()


def configure(workdir, database, broker, /, **sections):
    sections["database"] = {**FAST_DATABASE, **sections.get("database", {})}
    return write_config(os.path.join(workdir, "outboxd.yaml"), database, broker, **sections)


def max_gap(times):
    return max(b - a for a, b in zip(times, times[1:]))


def test_ready_only_once_database_and_broker_are_up(workdir, database, broker, notify):
    # The broker's address has nothing listening until the relay opens it.
    port = free_port()
    path = configure(workdir, database, broker, broker={"url": f"amqp://127.0.0.1:{port}", "reconnect_max_ms": 200})
    daemon = Daemon(path).start()
    relay = None
    try:
        waiting = notify.wait_for_status("waiting for the broker")
        time.sleep(1.5)  # a few refused connection attempts
        assert not notify.times("READY=1"), daemon.log()
        assert notify.statuses()[:2] == ["connecting to the database", "waiting for the broker"]

        target = (broker.url.split("//")[1].split(":")[0], int(broker.url.rsplit(":", 1)[1]))
        relay = TcpRelay(port, target)
        opened = time.monotonic()
        ready = notify.wait_for("READY=1", timeout=15)
        assert ready > opened > waiting
        notify.wait_for_status("dispatching: 0 in flight, 0 dispatched", after=waiting)

        # Pings at half the interval, from the start on.
        time.sleep(WATCHDOG_S)
        pings = notify.times("WATCHDOG=1")
        assert len(pings) >= 3
        assert max_gap(pings) < WATCHDOG_S

        stop_signal = time.monotonic()
        assert daemon.stop() == 0, daemon.log()
        stopping = notify.wait_for("STOPPING=1", after=stop_signal, timeout=5)
        [(status_at, _)] = notify.seen(lambda line: line == "STATUS=stopping: 0 in flight", after=stop_signal)
        assert status_at >= stopping
        assert len(notify.times("READY=1")) == 1
    finally:
        if relay:
            relay.close()


def test_watchdog_pings_continue_while_statements_wait_on_a_lock(workdir, database, broker, notify):
    # Claims every 200 ms, so the loop keeps running into the lock.
    path = configure(workdir, database, broker, dispatch={"poll_interval_ms": 200})
    daemon = Daemon(path).start()
    notify.wait_for("READY=1")
    with database.connect(autocommit=False) as locker, locker.cursor() as cur:
        cur.execute("LOCK TABLE outbox.messages, outbox.leases IN ACCESS EXCLUSIVE MODE")
        locked = time.monotonic()
        time.sleep(2.5 * WATCHDOG_S)
        locker.rollback()
    unlocked = time.monotonic()
    notify.wait_for_status("dispatching", after=unlocked, timeout=15)
    pings = notify.times("WATCHDOG=1", after=locked - WATCHDOG_S)
    assert daemon.alive()
    assert daemon.stop() == 0, daemon.log()
    log = daemon.log()
    assert "statement timeout" in log, log  # the daemon did wait on the lock
    assert any(locked < t < unlocked for t in pings)
    assert max_gap([t for t in pings if t < unlocked + WATCHDOG_S]) < WATCHDOG_S, pings
    assert "connecting to the database" in notify.statuses(after=locked)


def test_a_watchdog_shorter_than_a_blocked_statement_refuses_to_start(workdir, database, broker, notify):
    path = configure(workdir, database, broker, database={"statement_timeout_ms": 30000})
    daemon = Daemon(path).start()
    assert daemon.process.wait(timeout=30) == 78
    log = daemon.log()
    assert "database.statement_timeout_ms (30000 ms) plus database.connect_timeout_ms (2000 ms" in log, log
    assert "set statement_timeout_ms to at most 560 or raise WatchdogSec" in log, log
    assert not notify.times("READY=1")


def replace_line(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text, text
    with open(path, "w") as f:
        f.write(text.replace(old, new))


def test_sighup_reloads_between_reloading_and_ready(workdir, database, broker, notify):
    path = configure(workdir, database, broker, dispatch={"batch_size": 500, "stats_interval_ms": 10000})
    daemon = Daemon(path).start()
    notify.wait_for("READY=1")

    replace_line(path, "batch_size: 500", "batch_size: 50")
    replace_line(path, "stats_interval_ms: 10000", "stats_interval_ms: 2000")
    replace_line(path, "statement_timeout_ms: 500", "statement_timeout_ms: 400")
    sent = time.monotonic()
    daemon.signal(signal.SIGHUP)
    ready = notify.wait_for("READY=1", after=sent)
    [(reloading, _)] = notify.seen(lambda line: line == "RELOADING=1", after=sent)
    [(stamped, stamp)] = notify.seen(lambda line: line.startswith("MONOTONIC_USEC="), after=sent)
    assert reloading == stamped < ready
    assert abs(int(stamp.split("=")[1]) / 1e6 - time.clock_gettime(time.CLOCK_MONOTONIC)) < 10
    assert "reloading" in notify.statuses(after=sent)
    wait_until(lambda: "reload: applied" in daemon.log(), timeout=5, what="the reload log line")
    log = daemon.log()
    assert "reload: applied dispatch.batch_size, dispatch.stats_interval_ms" in log, log
    assert "changed but kept as running until a restart: database.statement_timeout_ms" in log, log

    # An invalid file: its errors as check-config prints them, and the running configuration stays.
    replace_line(path, "batch_size: 50", "batch_size: 0")
    expected = run_cli("check-config", "-c", path, check=False)
    assert expected.returncode == 78
    sent = time.monotonic()
    daemon.signal(signal.SIGHUP)
    notify.wait_for("READY=1", after=sent)
    wait_until(lambda: "the running configuration stays" in daemon.log(), timeout=5, what="the refusal")
    log = daemon.log()
    first_error = expected.stderr.splitlines()[0]
    assert first_error.startswith(f"{path}:") and "dispatch.batch_size" in first_error
    assert first_error in log, log
    assert broker.password not in log
    assert daemon.alive()
    assert daemon.stop() == 0, log


def test_a_rotated_password_file_is_read_at_the_next_connection_attempt(workdir, database, broker, notify):
    if not broker.user:
        pytest.skip("the broker takes no password")
    secret = os.path.join(workdir, "broker-password")
    with open(secret, "w") as f:
        f.write("not-the-password\n")
    path = configure(workdir, database, broker, broker={"reconnect_max_ms": 200})
    replace_line(path, f'  password: "{broker.password}"', f'  password_file: "{secret}"')
    daemon = Daemon(path).start()
    waiting = notify.wait_for_status("waiting for the broker")
    time.sleep(1.5)  # refused logins, retried
    assert not notify.times("READY=1"), daemon.log()

    with open(secret + ".new", "w") as f:
        f.write(broker.password + "\n")
    os.rename(secret + ".new", secret)  # as credential tools replace a file
    rotated = time.monotonic()
    assert notify.wait_for("READY=1", timeout=15) > rotated > waiting

    # The running configuration still holds the old contents: a reload names the key, never a value.
    sent = time.monotonic()
    daemon.signal(signal.SIGHUP)
    notify.wait_for("READY=1", after=sent)
    wait_until(lambda: "reload: applied" in daemon.log(), timeout=5, what="the reload log line")
    assert daemon.stop() == 0, daemon.log()
    log = daemon.log()
    assert "reload: applied broker.password_file" in log, log
    assert broker.password not in log and "not-the-password" not in log, log


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_stats_interval_zero_turns_the_counts_off_and_the_loop_still_sleeps(workdir, database, broker, notify):
    path = configure(workdir, database, broker, dispatch={"stats_interval_ms": 0})
    daemon = Daemon(path).start()
    ready = notify.wait_for("READY=1")
    notify.wait_for_status("dispatching", after=ready - 1)
    before = cpu_seconds(daemon.process.pid)
    time.sleep(3)
    assert cpu_seconds(daemon.process.pid) - before < 0.5  # idle: asleep in poll(), not spinning
    assert notify.statuses(after=ready)[-1:] == ["dispatching: 0 in flight, 0 dispatched"]
    assert daemon.stop() == 0, daemon.log()
