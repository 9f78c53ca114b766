"""outboxd behind PgBouncer: order, schedules, cancel, parking and takeover in transaction mode; session mode.

scripts/services.sh runs PgBouncer in front of the test cluster in both pool modes, with pools
of 2 server connections per database and role, so the daemons and the writers here share them:
a statement prepared in one client's server connection, or a setting left in one, would meet the others.
The daemon's database.url is the harness's own with PgBouncer's host and port; its LISTEN
connection (database.listen_url) is that same URL, straight to PostgreSQL.
"""

import os
import signal
import time
from urllib.parse import urlparse, urlunparse

import pytest

from harness import (Broker, Consumer, Daemon, Peer, enqueue, require_env, run_cli, unique, wait_parked,
                     wait_until, write_config)

SHORT_LEASES = {"lease_ttl_ms": 3000, "renew_interval_ms": 1000, "safety_margin_ms": 1000}


def pooler_url(url, mode):
    """`url` with the host and port of PgBouncer in `mode` (transaction or session)."""
    env = {"transaction": "OUTBOXD_TEST_PGBOUNCER_TX_URL", "session": "OUTBOXD_TEST_PGBOUNCER_SESSION_URL"}[mode]
    host = urlparse(require_env(env)).netloc.rpartition("@")[2]
    parsed = urlparse(url)
    user = parsed.netloc.rpartition("@")[0]
    return urlunparse(parsed._replace(netloc=f"{user}@{host}" if user else host))


def migrate(workdir, database, broker):
    """`outboxd migrate` straight to PostgreSQL, as the superuser when the harness has one apart."""
    superuser = type("Superuser", (), {"url": getattr(database, "superuser_url", database.url),
                                       "schema": getattr(database, "schema", "outbox")})
    run_cli("migrate", "-c", write_config(f"{workdir}/migrate.yaml", superuser, broker))


def pooled_config(workdir, database, broker, mode, name="outboxd", listen=True, **sections):
    """A config whose database.url goes through PgBouncer in `mode`."""
    db = {"url": pooler_url(database.url, mode), "pooler": mode}
    if mode == "transaction" and listen:
        db["listen_url"] = database.url
    db.update(sections.pop("database", {}))
    return write_config(f"{workdir}/{name}.yaml", database, broker, database=db, **sections)


def writer(database, mode="transaction"):
    """An application connection through PgBouncer, sharing its server connections with the daemons."""
    import psycopg2
    conn = psycopg2.connect(pooler_url(getattr(database, "writer_url", database.url), mode))
    conn.autocommit = True
    return conn


def pending(database):
    return database.query("SELECT count(*) FROM outbox.messages WHERE status = 'pending'")[0][0]


def owners(database):
    return dict(database.query("SELECT owner, count(*) FROM outbox.leases WHERE owner IS NOT NULL "
                               "AND expires_at > now() GROUP BY owner"))


def assert_clean(daemon):
    """Stops the daemon; it must exit 0 having never lost its database connection to an error."""
    code = daemon.stop()
    log = daemon.log()
    assert code == 0, log[-3000:]
    assert "database unavailable" not in log, log[-3000:]


@pytest.fixture
def rabbitmq():
    return Broker("rabbitmq")


def test_transaction_pooler_keeps_per_session_order(workdir, database, rabbitmq):
    queue = unique("pgb-order")
    sessions, per_session = 20, 30
    migrate(workdir, database, rabbitmq)
    consumer = Consumer(rabbitmq, queue, credit=1000)
    daemon = Daemon(pooled_config(workdir, database, rabbitmq, "transaction")).start()
    try:
        with writer(database) as conn, conn.cursor() as cur:
            for i in range(per_session):
                for s in range(sessions):
                    enqueue(cur, queue, f"s{s}:{i}", f"{i}".encode(), session_id=f"s{s}")
        received = consumer.receive(sessions * per_session, timeout=60)
    finally:
        consumer.close()
        assert_clean(daemon)
    last = {}
    for message in received:
        seq = int(message.body)
        assert seq == last.get(message.group_id, -1) + 1, f"{message.group_id}: {seq} after {last.get(message.group_id)}"
        last[message.group_id] = seq
    assert len(last) == sessions


def test_transaction_pooler_scheduled_row_arrives_on_time_and_cancelled_never(workdir, database, rabbitmq):
    queue = unique("pgb-scheduled")
    migrate(workdir, database, rabbitmq)
    consumer = Consumer(rabbitmq, queue)
    daemon = Daemon(pooled_config(workdir, database, rabbitmq, "transaction")).start()
    try:
        time.sleep(0.5)  # idle: the NOTIFY over listen_url must wake it
        with writer(database) as conn, conn.cursor() as cur:
            cur.execute("SELECT now() + interval '2 seconds'")
            due = cur.fetchone()[0]
            enqueue(cur, queue, "timeout-1", b"due", due_at=due)
            enqueue(cur, queue, "timeout-cancelled", b"never", due_at=due)
            cur.execute("SELECT outbox.cancel('timeout-cancelled')")
            assert cur.fetchone()[0] is True
        [message] = consumer.receive(1, timeout=10)
        arrived = consumer.received[-1][0]
        late = consumer.quiet_for(1.5)
    finally:
        consumer.close()
        assert_clean(daemon)
    assert message.id == "timeout-1"
    lateness = arrived - due.timestamp()
    assert lateness >= -0.002, f"arrived {-lateness:.3f}s before due_at"
    assert lateness < 0.2, f"arrived {lateness:.3f}s after due_at"
    assert late == []
    assert database.query("SELECT status FROM outbox.messages WHERE message_id = 'timeout-cancelled'") == [
        ("cancelled",)]


def test_transaction_pooler_without_listen_url_polls_and_never_asks_writers_to_notify(workdir, database, rabbitmq):
    queue = unique("pgb-poll")
    migrate(workdir, database, rabbitmq)
    consumer = Consumer(rabbitmq, queue)
    config = pooled_config(workdir, database, rabbitmq, "transaction", listen=False,
                           dispatch={"poll_interval_ms": 500}, leases={"instance_id": "pgb-poll"})
    daemon = Daemon(config).start()
    try:
        wait_until(lambda: "no NOTIFY wake-ups" in daemon.log(), timeout=10, what="the start-up log line")
        time.sleep(1.0)  # idle for two polls
        with writer(database) as conn, conn.cursor() as cur:
            enqueue(cur, queue, "polled-1", b"x")
        consumer.receive(1, timeout=5)
        idle = database.query("SELECT idle FROM outbox.instances WHERE instance_id = 'pgb-poll'")
    finally:
        consumer.close()
        assert_clean(daemon)
    assert idle == [(False,)], "an instance that cannot LISTEN must not ask writers to NOTIFY"


def test_transaction_pooler_rejected_row_parks_and_blocks_only_its_session(workdir, database):
    peer = Peer(workdir, "--reject", "m0:100")
    migrate(workdir, database, peer)
    daemon = Daemon(pooled_config(workdir, database, peer, "transaction", dispatch={
        "max_attempts": 3, "backoff_initial_ms": 50, "backoff_max_ms": 200})).start()
    try:
        with writer(database) as conn, conn.cursor() as cur:
            for i in range(10):
                enqueue(cur, "q", f"m{i}", str(i).encode(), session_id=f"s{i % 2}")
        wait_parked(database, "m0")
        wait_until(lambda: pending(database) == 4, timeout=20, what="session s1 dispatched")
    finally:
        assert_clean(daemon)
        peer.stop()
    attempts, last_error = database.query("SELECT attempts, last_error FROM outbox.messages WHERE message_id = 'm0'")[0]
    assert attempts == 3
    assert "scripted reject of m0" in last_error
    published = {d["id"] for d in peer.deliveries()}
    assert not published & {"m2", "m4", "m6", "m8"}, "rows behind a parked row must wait"
    assert {"m1", "m3", "m5", "m7", "m9"} <= published


def test_transaction_pooler_kill_9_of_one_instance_the_other_takes_over_and_nothing_is_lost(
        workdir, database, rabbitmq):
    queue = unique("pgb-takeover")
    rows = 2000
    migrate(workdir, database, rabbitmq)
    consumer = Consumer(rabbitmq, queue, credit=2000)

    def instance(name):
        return Daemon(pooled_config(workdir, database, rabbitmq, "transaction", name=name,
                                    leases={"instance_id": name, **SHORT_LEASES}), name=name).start()

    victim, heir = instance("pgb-victim"), instance("pgb-heir")
    try:
        wait_until(lambda: owners(database) == {"pgb-victim": 32, "pgb-heir": 32}, timeout=30,
                   what="two instances sharing the partitions")
        with writer(database) as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO outbox.messages (message_id, destination, session_id, body) "
                        "SELECT 'm' || i, %s, 's' || (i %% 100), convert_to(i::text, 'UTF8') "
                        "FROM generate_series(0, %s - 1) i", (queue, rows // 2))
            victim.kill()
            cur.execute("INSERT INTO outbox.messages (message_id, destination, session_id, body) "
                        "SELECT 'm' || i, %s, 's' || (i %% 100), convert_to(i::text, 'UTF8') "
                        "FROM generate_series(%s, %s - 1) i", (queue, rows // 2, rows))
        wait_until(lambda: owners(database) == {"pgb-heir": 64}, timeout=15, what="the heir holding every partition")
        wait_until(lambda: pending(database) == 0, timeout=60, what="every row dispatched")
        received = consumer.receive_all({f"m{i}" for i in range(rows)})
    finally:
        consumer.close()
        assert_clean(heir)
    assert {m.id for m in received} == {f"m{i}" for i in range(rows)}


def test_session_pooler_dispatches_and_wakes_on_notify(workdir, database, rabbitmq):
    queue = unique("pgb-session")
    migrate(workdir, database, rabbitmq)
    consumer = Consumer(rabbitmq, queue)
    daemon = Daemon(pooled_config(workdir, database, rabbitmq, "session",
                                  dispatch={"poll_interval_ms": 60000})).start()
    try:
        time.sleep(1.0)  # idle: only NOTIFY, on the pooled connection itself, can wake it before the poll
        with writer(database, "session") as conn, conn.cursor() as cur:
            for i in range(20):
                enqueue(cur, queue, f"m{i}", str(i).encode(), session_id="s")
        received = consumer.receive(20, timeout=10)
    finally:
        consumer.close()
        assert_clean(daemon)
    assert [m.body for m in received] == [str(i).encode() for i in range(20)]



def test_a_pooler_without_the_setting_is_named(workdir, database, rabbitmq):
    # PgBouncer refuses the startup options that outboxd sends straight to PostgreSQL.
    migrate(workdir, database, rabbitmq)
    config = write_config(f"{workdir}/unset.yaml", database, rabbitmq,
                          database={"url": pooler_url(database.url, "transaction")})
    daemon = Daemon(config).start()
    try:
        wait_until(lambda: "database unavailable" in daemon.log(), timeout=15, what="the failed connection")
    finally:
        daemon.stop()
    assert "set `database.pooler: transaction` or `session`" in daemon.log(), daemon.log()


def lenient_transaction_pooler(workdir, database):
    """A PgBouncer of this test's own, in transaction mode, that ignores the startup options it cannot pass on
    (a common setting): a daemon without `database.pooler` then gets past its login."""
    import shutil
    import subprocess
    from harness import free_port
    target = urlparse(database.url)
    directory = f"{workdir}/pgbouncer"
    os.makedirs(directory)
    port = free_port()
    with open(f"{directory}/users.txt", "w") as f:
        f.write('"postgres" ""\n')
    with open(f"{directory}/pgbouncer.ini", "w") as f:
        f.write(f"[databases]\n* = host={target.hostname} port={target.port}\n[pgbouncer]\n"
                f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\nauth_type = trust\n"
                f"auth_file = {directory}/users.txt\nauth_user = postgres\npool_mode = transaction\n"
                f"ignore_startup_parameters = options\ndefault_pool_size = 2\n"
                f"logfile = {directory}/pgbouncer.log\npidfile = {directory}/pgbouncer.pid\n")
    prefix = []
    if os.getuid() == 0:
        os.chmod(workdir, 0o755)
        shutil.chown(directory, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*prefix, "/usr/sbin/pgbouncer", "-d", f"{directory}/pgbouncer.ini"], check=True, cwd="/")
    wait_until(lambda: os.path.exists(f"{directory}/pgbouncer.pid"), timeout=10, what="pgbouncer")
    return urlunparse(target._replace(netloc=f"{target.netloc.rpartition('@')[0]}@127.0.0.1:{port}")), directory


def test_a_listen_the_pooler_drops_is_reported_and_polled_for(workdir, database, rabbitmq):
    migrate(workdir, database, rabbitmq)
    url, directory = lenient_transaction_pooler(workdir, database)
    queue = unique("pgb-lost-listen")
    consumer = Consumer(rabbitmq, queue)
    daemon = Daemon(write_config(f"{workdir}/unset.yaml", database, rabbitmq, database={"url": url},
                                 dispatch={"poll_interval_ms": 500})).start()
    try:
        wait_until(lambda: "database connected" in daemon.log(), timeout=15, what="the connection")
        with writer(database) as conn, conn.cursor() as cur:
            enqueue(cur, queue, "polled-1", b"x")
        consumer.receive(1, timeout=10)  # found by the poll it fell back to
    finally:
        consumer.close()
        code = daemon.stop()
        with open(f"{directory}/pgbouncer.pid") as f:
            os.kill(int(f.read()), signal.SIGTERM)
    assert code == 0, daemon.log()
    assert "did not reach this connection" in daemon.log() and "set `database.pooler: transaction`" in daemon.log(), \
        daemon.log()
