"""Network faults between the daemon and its services, through Toxiproxy: latency, a half-open link, resets, a bandwidth cap.

The daemon reaches PostgreSQL and RabbitMQ only through proxies; a writer commits
rows straight to PostgreSQL all along, over several sessions. Each fault holds on
one link for a few seconds and is then removed ("healed"). Nothing committed may
be lost, each session keeps its order, duplicates stay within the in-flight
window, the same daemon process survives every fault, and after each heal the
rows committed before it are dispatched within twice the timeouts that detect
that fault, all set low here. `pytest -s` prints the recovery time of each fault.
"""

import math
import time
import urllib.request
from urllib.parse import urlparse, urlunparse

import pytest

from harness import Broker, Consumer, Daemon, free_port, unique, wait_until, write_config
from steady_writer import Writer, session_order_violations
from toxiproxy import Toxiproxy

# The timeouts that detect a fault, low so that the test stays short. Keepalives and
# tcp_user_timeout (in the database URL, over the daemon's defaults) end at the proxy here.
KEEPALIVES = {"keepalives_idle": 1, "keepalives_interval": 1, "keepalives_count": 2}  # dead after 1 + 1 * 2 s
TCP_USER_TIMEOUT_MS = 2000  # sent bytes unacknowledged this long: the connection is dead
STATEMENT_TIMEOUT_MS = 2000
CONNECT_TIMEOUT_MS = 1000
IDLE_TIMEOUT_MS = 2000  # AMQP: nothing from the broker this long
OUTCOME_TIMEOUT_MS = 2000
CONNECT_TIMEOUT_S = max(2, math.ceil(CONNECT_TIMEOUT_MS / 1000))  # as libpq applies it: whole seconds, at least 2
REPLY_TIMEOUT_S = STATEMENT_TIMEOUT_MS / 1000 + CONNECT_TIMEOUT_S  # the daemon's wait for any database reply
RECONNECT_MAX_MS = 500
IN_FLIGHT = 200
BATCH_SIZE = 100

HOLD_S = 4
# toxic: its attributes, and for each link the timeouts (seconds) that bound the recovery after the heal.
FAULTS = [
    ("latency", {"latency": 300, "jitter": 50},
     {"database": {"statement_timeout": STATEMENT_TIMEOUT_MS / 1000},
      "broker": {"outcome_timeout": OUTCOME_TIMEOUT_MS / 1000}}),
    # Half-open: bytes vanish and the connection stays open. The proxy's kernel still acknowledges
    # and answers keepalives, so those and tcp_user_timeout notice nothing here (they would a dead
    # host); removing the toxic also closes the connections it swallowed bytes of.
    ("timeout", {"timeout": 0},
     {"database": {"statement_timeout + connect_timeout": REPLY_TIMEOUT_S},
      "broker": {"idle_timeout": IDLE_TIMEOUT_MS / 1000}}),
    ("reset_peer", {"timeout": 0},
     {"database": {"connect_timeout + reconnect_max": CONNECT_TIMEOUT_S + RECONNECT_MAX_MS / 1000},
      "broker": {"idle_timeout": IDLE_TIMEOUT_MS / 1000}}),
    ("bandwidth", {"rate": 50},  # KB/s
     {"database": {"statement_timeout": STATEMENT_TIMEOUT_MS / 1000},
      "broker": {"outcome_timeout": OUTCOME_TIMEOUT_MS / 1000}}),
]


@pytest.fixture
def rabbitmq():
    return Broker("rabbitmq")


@pytest.fixture
def toxiproxy(workdir):
    proxy = Toxiproxy(workdir)
    yield proxy
    proxy.stop()


def through(url, port, **params):
    """`url` with `port` instead of its own, and `params` added to its query."""
    parsed = urlparse(url)
    netloc = f"{parsed.netloc.rpartition(':')[0]}:{port}"
    query = "&".join([*filter(None, [parsed.query]), *(f"{k}={v}" for k, v in params.items())])
    return urlunparse(parsed._replace(netloc=netloc, query=query))


def backlog_before(database, moment):
    """Rows committed before `moment` (epoch seconds) and not yet dispatched."""
    return database.query("SELECT count(*) FROM outbox.messages WHERE status <> 'dispatched' "
                          "AND created_at <= to_timestamp(%s)", (moment,))[0][0]


def proxied_daemon(workdir, database, rabbitmq, toxiproxy, **sections):
    """An outboxd that reaches both services through `toxiproxy` only, with the low timeouts above."""
    amqp = urlparse(rabbitmq.url)
    ports = {"database": toxiproxy.proxy("database", urlparse(database.url).port),
             "broker": toxiproxy.proxy("broker", amqp.port)}
    config = {
        "database": {"url": through(database.url, ports["database"], tcp_user_timeout=TCP_USER_TIMEOUT_MS,
                                    **KEEPALIVES),
                     "statement_timeout_ms": STATEMENT_TIMEOUT_MS, "connect_timeout_ms": CONNECT_TIMEOUT_MS,
                     "reconnect_min_ms": 100, "reconnect_max_ms": RECONNECT_MAX_MS},
        "broker": {"url": f"{amqp.scheme}://127.0.0.1:{ports['broker']}", "idle_timeout_ms": IDLE_TIMEOUT_MS,
                   "outcome_timeout_ms": OUTCOME_TIMEOUT_MS, "reconnect_min_ms": 100,
                   "reconnect_max_ms": RECONNECT_MAX_MS},
        "dispatch": {"in_flight": IN_FLIGHT, "batch_size": BATCH_SIZE},
        "retention": {"mode": "keep"},
    }
    for section, values in sections.items():
        config.setdefault(section, {}).update(values)
    path = write_config(f"{workdir}/outboxd.yaml", database, rabbitmq, **config)
    return Daemon(path).start()


def test_network_faults_lose_nothing_and_heal(workdir, toxiproxy, database, rabbitmq):
    queue = unique("netfault")
    consumer = Consumer(rabbitmq, queue)
    daemon = proxied_daemon(workdir, database, rabbitmq, toxiproxy)
    pid = daemon.process.pid
    writer = Writer(database.writer_url, queue)  # straight to PostgreSQL, never through a proxy
    recoveries = []  # (link, toxic, seconds from heal to backlog zero, bound, timeouts named)
    try:
        writer.start()
        wait_until(lambda: database.query("SELECT count(*) FROM outbox.messages WHERE status = 'dispatched'")[0][0]
                   > 100, timeout=30, what=f"rows flowing before the first fault\n{daemon.log()[-3000:]}")
        for toxic, attributes, timeouts in FAULTS:
            for link in ("database", "broker"):
                toxiproxy.add(link, toxic, **attributes)
                time.sleep(HOLD_S)
                toxiproxy.heal(link, toxic)
                healed_at = time.time()
                bound = 2 * max(timeouts[link].values())
                try:
                    wait_until(lambda: backlog_before(database, healed_at) == 0, timeout=max(30, 3 * bound),
                               interval=0.05)
                    recovered = time.time() - healed_at
                except AssertionError:
                    recovered = float("inf")
                recoveries.append((link, toxic, recovered, bound, timeouts[link]))
                assert daemon.alive() and daemon.process.pid == pid, daemon.log()[-3000:]
        writer.stop()

        print(f"\n{'link':9} {'fault':11} {'recovered':>9} {'bound':>6}  timeouts that bound it (s)")
        for link, toxic, recovered, bound, timeouts in recoveries:
            print(f"{link:9} {toxic:11} {recovered:8.2f}s {bound:5.1f}s  "
                  + ", ".join(f"{name} {value:g}" for name, value in timeouts.items()))
        slow = [(link, toxic, round(s, 2)) for link, toxic, s, bound, _ in recoveries if s > bound]
        assert not slow, f"backlog not dispatched within its bound after the heal: {slow}\n{daemon.log()[-5000:]}"

        wait_until(lambda: database.query("SELECT count(*) FROM outbox.messages WHERE status <> 'dispatched'")[0][0]
                   == 0, timeout=60, what=f"every row dispatched\n{daemon.log()[-3000:]}")
        rows = dict(database.query("SELECT message_id, session_id FROM outbox.messages"))
        committed = [message_id for message_id, _ in writer.committed] + [m for m in writer.in_doubt if m in rows]
        deliveries = [m.id for m in consumer.receive_all(committed, timeout=60, settle=1.0)]
        lost = set(committed) - set(deliveries)
        duplicates = len(deliveries) - len(set(deliveries))
        print(f"{len(committed)} rows committed, {len(writer.in_doubt)} in doubt, {duplicates} duplicates")
        assert not lost, f"{len(lost)} committed rows never published, e.g. {sorted(lost)[:5]}\n{daemon.log()[-3000:]}"
        assert session_order_violations(deliveries, rows) == []
        # At least once: each fault may repeat what was in flight or accepted but not yet marked.
        assert duplicates <= len(recoveries) * (IN_FLIGHT + 2 * BATCH_SIZE), duplicates
        assert daemon.alive() and daemon.process.pid == pid, daemon.log()[-3000:]
    finally:
        writer.stopping.set()
        assert daemon.stop() == 0, daemon.log()[-3000:]
        consumer.close()


def disconnects(metrics_port, peer):
    """outboxd_disconnects_total{peer} from /metrics, served by a thread of its own."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(f'outboxd_disconnects_total{{peer="{peer}"}} '):
                return float(line.split()[-1])
    return 0.0


def test_a_half_open_database_link_is_noticed_while_it_lasts(workdir, toxiproxy, database, rabbitmq):
    metrics_port = free_port()
    daemon = proxied_daemon(workdir, database, rabbitmq, toxiproxy,
                            http={"listen": f"127.0.0.1:{metrics_port}"},
                            dispatch={"poll_interval_ms": 200})
    try:
        wait_until(lambda: b"database connected" in open(daemon.log_path, "rb").read(), timeout=30,
                   what="the daemon connected")
        before = disconnects(metrics_port, "database")
        toxiproxy.add("database", "timeout", timeout=0)
        # The next poll's claim goes into the void. The proxy answers keepalives and acknowledges what
        # is sent, and the server never gets the statement: only the daemon's own wait for a reply,
        # statement_timeout + connect_timeout, can end it.
        noticed_within = 2 * REPLY_TIMEOUT_S
        try:
            wait_until(lambda: disconnects(metrics_port, "database") > before, timeout=noticed_within,
                       what="the daemon noticing the half-open database link")
        finally:
            toxiproxy.heal("database", "timeout")
    finally:
        assert daemon.stop() == 0, daemon.log()[-3000:]
