"""The database refusing or blocking the daemon for a while: it waits without spinning, /healthz tells, then it carries on."""

import os
import time
import urllib.error
import urllib.request

import psycopg2
import pytest

from harness import Broker, Consumer, Daemon, Peer, enqueue, free_port, run_cli, unique, wait_until, write_config

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User plus system CPU time the process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def admin(database, *statements):
    """Runs statements in the cluster's maintenance database, which stays reachable."""
    conn = psycopg2.connect(database.admin_url)
    conn.autocommit = True
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
    conn.close()


def shut_out(database, allowed):
    """Refuses (or allows again) new connections to the test database and ends the open ones."""
    admin(database, f'ALTER DATABASE "{database.name}" WITH ALLOW_CONNECTIONS {str(allowed).lower()}')
    if not allowed:
        admin(database, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        f"WHERE datname = '{database.name}' AND pid <> pg_backend_pid()")


@pytest.fixture
def rabbitmq():
    return Broker("rabbitmq")


def test_database_unreachable_waits_without_spinning(workdir, database, rabbitmq):
    # Short timers, so that every one of them falls due several times during the outage:
    # a step that skips its turn while the database is down must not leave the loop a
    # deadline in the past.
    path = write_config(f"{workdir}/outboxd.yaml", database, rabbitmq,
                        database={"reconnect_min_ms": 200, "reconnect_max_ms": 1000},
                        leases={"lease_ttl_ms": 3000, "renew_interval_ms": 300, "safety_margin_ms": 1000},
                        retention={"purge_interval_ms": 200},
                        dispatch={"poll_interval_ms": 1000})
    queue = unique("outage")
    consumer = Consumer(rabbitmq, queue)
    daemon = Daemon(path).start()
    try:
        wait_until(lambda: database.query("SELECT count(*) FROM outbox.leases WHERE owner IS NOT NULL")[0][0] > 0,
                   timeout=30, what="leases taken")
        shut_out(database, allowed=False)
        wait_until(lambda: "database unavailable" in daemon.log(), timeout=30, what="the daemon noticing")
        time.sleep(4)  # past the lease's end and several purge and renewal turns
        before = cpu_seconds(daemon.process.pid)
        time.sleep(5)
        used = cpu_seconds(daemon.process.pid) - before
        assert used < 0.5, f"{used:.2f} s of CPU in 5 s while the database was unreachable"
        assert daemon.alive(), daemon.log()

        shut_out(database, allowed=True)
        with database.writer() as conn, conn.cursor() as cur:
            enqueue(cur, queue, "after-outage", b"x")
        assert [m.id for m in consumer.receive(1, timeout=30)] == ["after-outage"], daemon.log()
    finally:
        shut_out(database, allowed=True)
        assert daemon.stop() == 0, daemon.log()
        consumer.close()


def healthz(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            return reply.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:  # not listening yet
        return None


def test_healthz_turns_503_when_the_loop_is_stuck_longer_than_the_poll_interval_plus_30_s(workdir, database):
    # docs/metrics.md: /healthz is 200 while the loop turns, 503 once it has not for poll interval + 30 s.
    peer = Peer(workdir)
    port = free_port()
    path = write_config(f"{workdir}/outboxd.yaml", database, peer, http={"listen": f"127.0.0.1:{port}"},
                        database={"statement_timeout_ms": 120000}, dispatch={"poll_interval_ms": 1000})
    run_cli("migrate", "-c", path)
    daemon = Daemon(path).start()
    try:
        wait_until(lambda: healthz(port) == 200, timeout=20, what="/healthz 200")
        with database.connect(autocommit=False) as locker, locker.cursor() as cur:
            cur.execute("LOCK TABLE outbox.messages IN ACCESS EXCLUSIVE MODE")  # the next claim waits on it
            locked = time.monotonic()
            time.sleep(25)
            assert healthz(port) == 200, "stale before poll interval + 30 s"
            wait_until(lambda: healthz(port) == 503, timeout=15, interval=0.2, what="/healthz 503")
            stale_after = time.monotonic() - locked
            locker.rollback()
        wait_until(lambda: healthz(port) == 200, timeout=10, what="/healthz 200 again")
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()
    assert 29.5 <= stale_after < 36, stale_after  # the last turn came up to one poll interval before the lock
