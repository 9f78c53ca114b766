"""outboxd scraped by a real Prometheus: the backlog series form and drain, /metrics passes promtool, the rules load."""

import json
import os
import re
import shutil
import signal
import subprocess
import urllib.parse
import urllib.request

import pytest

import harness
from harness import Broker, Consumer, Daemon, enqueue, free_port, run_cli, unique, wait_until, write_config

RULES = os.path.join(os.path.dirname(__file__), "..", "..", "config", "prometheus", "outboxd.rules.yml")
# Generous: two cores shared with other builds and tests; every wait polls.
TIMEOUT = 90
FAR = "2100-01-01T00:00:00Z"  # due_at of rows that must not fall due during a test


@pytest.fixture
def broker():
    return Broker("rabbitmq")


@pytest.fixture
def prometheus_binary():
    path = shutil.which("prometheus")
    if not path:
        if harness.REQUIRED:
            pytest.fail("prometheus is not installed (Debian: prometheus; scripts/setup.sh installs it)")
        pytest.skip("prometheus is not installed")
    return path


class Prometheus:
    """A Prometheus server of its own in `workdir`, scraping `target` every second with outboxd's rules."""

    def __init__(self, binary, workdir, target):
        self.port = free_port()
        config = os.path.join(workdir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    f"rule_files:\n  - {os.path.abspath(RULES)}\n"
                    f"scrape_configs:\n  - job_name: outboxd\n    static_configs:\n      - targets: ['{target}']\n")
        self.log_path = os.path.join(workdir, "prometheus.log")
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir}/tsdb",
                 f"--web.listen-address=127.0.0.1:{self.port}"], stdout=log, stderr=log)
        harness._started.append(self.process)  # the workdir fixture kills it if the test fails
        wait_until(self._ready, timeout=TIMEOUT, interval=0.2, what="Prometheus ready")

    def _get(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as response:
            return response.read()

    def _ready(self):
        assert self.process.poll() is None, self.log()
        try:
            return self._get("/-/ready") is not None
        except OSError:
            return False

    def query(self, expr):
        """The instant vector of `expr` as {frozenset(labels): value}."""
        body = json.loads(self._get("/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
        assert body["status"] == "success", body
        return {frozenset(r["metric"].items()): float(r["value"][1]) for r in body["data"]["result"]}

    def scalar(self, expr):
        """The single value of `expr`, or None while it has none."""
        values = list(self.query(expr).values())
        return values[0] if len(values) == 1 else None

    def alert_states(self, name):
        body = json.loads(self._get("/api/v1/alerts"))
        return {a["state"] for a in body["data"]["alerts"] if a["labels"]["alertname"] == name}

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)


def start_daemon(workdir, database, broker):
    port = free_port()
    config = write_config(f"{workdir}/outboxd.yaml", database, broker,
                          http={"listen": f"127.0.0.1:{port}", "backlog_interval_ms": 200})
    return Daemon(config).start(), port


def metrics_text(port):
    """The body of /metrics, or b"" while the daemon does not listen yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            return response.read()
    except OSError:
        return b""


def backlog_samples(port):
    """The backlog gauges of /metrics as {(name, destination, state): value}; "" for a label it has not."""
    samples = {}
    for line in metrics_text(port).decode().splitlines():
        found = re.fullmatch(r'(outboxd_backlog_\w+)(?:\{destination="([^"]*)"(?:,state="(\w+)")?\})? (\S+)', line)
        if found:
            name, destination, state, value = found.groups()
            samples[(name, destination or "", state or "")] = float(value)
    return samples


def until(prometheus, expr, predicate, what):
    """Polls `expr` until its single value satisfies `predicate`; returns that value."""
    def check():
        value = prometheus.scalar(expr)
        return value is not None and predicate(value) and (value,)
    return wait_until(check, timeout=TIMEOUT, interval=0.5, what=f"{what} ({expr})")[0]


def write_backlog(database, blocked, later):
    """A parked row blocking five due rows of its session in `blocked`, three rows an hour ahead in `later`."""
    with database.writer() as conn, conn.cursor() as cur:
        enqueue(cur, blocked, "parked-0", b"p", session_id="s", due_at=FAR)
        cur.execute("SELECT now() + interval '1 hour'")
        hour = cur.fetchone()[0]
        for i in range(3):
            enqueue(cur, later, f"later-{i}", b"l", due_at=hour)
    # Parking is the daemon's (or an operator's) doing; here the test's superuser stands in.
    database.query("UPDATE outbox.messages SET status = 'parked', attempts = 10 WHERE message_id = 'parked-0'")
    with database.writer() as conn, conn.cursor() as cur:
        for i in range(5):
            enqueue(cur, blocked, f"due-{i}", b"d", session_id="s")


def test_backlog_series_form_in_prometheus_and_fall_to_zero_as_rows_drain(workdir, database, broker,
                                                                           prometheus_binary):
    blocked, later = unique("blocked"), unique("later")
    consumers = [Consumer(broker, blocked), Consumer(broker, later)]
    daemon, port = start_daemon(workdir, database, broker)
    prometheus = Prometheus(prometheus_binary, workdir, f"127.0.0.1:{port}")
    try:
        write_backlog(database, blocked, later)
        until(prometheus, 'sum(outboxd_backlog_rows{state="due"})', lambda v: v == 5, "five due rows")
        until(prometheus, 'sum(outboxd_backlog_rows{state="parked"})', lambda v: v == 1, "one parked row")
        until(prometheus, 'sum(outboxd_backlog_rows{state="scheduled"})', lambda v: v == 3, "three scheduled rows")
        until(prometheus, f'outboxd_backlog_oldest_due_age_seconds{{destination="{blocked}"}}', lambda v: v >= 2,
              "the blocked rows' lag growing")
        until(prometheus, f'outboxd_backlog_next_due_seconds{{destination="{later}"}}',
              lambda v: 3000 < v <= 3600, "the next scheduled row an hour ahead")
        wait_until(lambda: prometheus.alert_states("OutboxdParkedRows") & {"pending", "firing"},
                   timeout=TIMEOUT, interval=0.5, what="the parked-rows alert")
        assert prometheus.alert_states("OutboxdBrokerDisconnected") == set()

        # The operator gives up the parked row; the later rows are moved to now.
        run_cli("skip", "-c", daemon.config_path, "parked-0")
        with database.writer() as conn, conn.cursor() as cur:
            for i in range(3):
                cur.execute("SELECT outbox.reschedule(%s, now())", (f"later-{i}",))
        until(prometheus, "sum(outboxd_backlog_rows)", lambda v: v == 0, "every count back to 0")
        until(prometheus, "max(outboxd_backlog_oldest_due_age_seconds)", lambda v: v == 0, "the lag back to 0")
        assert prometheus.query("outboxd_backlog_next_due_seconds") == {}
        assert len(consumers[0].receive_all([f"due-{i}" for i in range(5)], timeout=TIMEOUT)) == 5
        assert len(consumers[1].receive_all([f"later-{i}" for i in range(3)], timeout=TIMEOUT)) == 3
    finally:
        for consumer in consumers:
            consumer.close()
        assert prometheus.stop() == 0, prometheus.log()
        assert daemon.stop() == 0, daemon.log()


def test_backlog_series_go_to_the_destinations_owing_most_rows_not_to_names_sorting_first(workdir, database,
                                                                                         broker):
    """Writers choose destination names: 21 destinations of one parked row, named to sort first, must not push out
    one with 500 due rows blocked behind a parked row; the truncation gauge counts the destinations left out."""
    big = unique("orders")
    small = [f"!a{i:02}" for i in range(1, 22)]
    with database.writer() as conn, conn.cursor() as cur:
        for name in small:
            enqueue(cur, name, f"{name}-0", b"x", due_at=FAR)
        enqueue(cur, big, "parked-0", b"p", session_id="s", due_at=FAR)
    database.query("UPDATE outbox.messages SET status = 'parked', attempts = 10")  # every row written so far
    with database.writer() as conn, conn.cursor() as cur:
        cur.execute("SELECT outbox.enqueue(destination => %s, message_id => 'due-' || i, body => 'd'::bytea, "
                    "session_id => 's') FROM generate_series(1, 500) i", (big,))
    daemon, port = start_daemon(workdir, database, broker)
    try:
        # Once every partition is measured, the 20 destinations shown hold 20 parked rows whichever they are.
        def measured():
            samples = backlog_samples(port)
            parked = sum(v for (name, _, state), v in samples.items()
                         if name == "outboxd_backlog_rows" and state == "parked")
            return parked == 20 and samples
        samples = wait_until(measured, timeout=TIMEOUT, interval=0.2, what="20 parked rows in the backlog series")
        shown = {d for (name, d, _) in samples if name == "outboxd_backlog_rows"}
        assert len(shown) == 20, sorted(shown)
        assert samples.get(("outboxd_backlog_rows", big, "due")) == 500, sorted(shown)
        assert samples[("outboxd_backlog_destinations_truncated", "", "")] == 2
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_live_metrics_pass_promtool_with_backlog_series_and_awkward_destinations_until_turned_off(
        workdir, database, broker):
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool is not installed (Debian: prometheus)")
    awkward = unique('quote"back\\slash')
    daemon, port = start_daemon(workdir, database, broker)
    try:
        with database.writer() as conn, conn.cursor() as cur:
            enqueue(cur, awkward, "later-0", b"x", due_at=FAR)
        escaped = awkward.replace("\\", "\\\\").replace('"', '\\"')
        wait_until(lambda: f'destination="{escaped}",state="scheduled"}} 1'.encode() in metrics_text(port),
                   timeout=TIMEOUT, interval=0.2, what="the awkward destination's series")
        checked = subprocess.run([promtool, "check", "metrics"], input=metrics_text(port), capture_output=True,
                                 timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr

        # Reloaded with backlog_interval_ms 0, the figures go rather than grow stale.
        write_config(daemon.config_path, database, broker,
                     http={"listen": f"127.0.0.1:{port}", "backlog_interval_ms": 0})
        daemon.signal(signal.SIGHUP)
        wait_until(lambda: b"outboxd_backlog_rows{" not in metrics_text(port) and b"# TYPE outboxd_backlog_rows"
                   in metrics_text(port), timeout=TIMEOUT, interval=0.2, what="the backlog series gone after reload")
    finally:
        assert daemon.stop() == 0, daemon.log()
