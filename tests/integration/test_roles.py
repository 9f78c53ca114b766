"""outboxd as deployed: the daemon and the CLI with only the dispatcher role, each in fresh sessions."""

import json

import pytest

from harness import Broker, Consumer, Daemon, Peer, enqueue, run_cli, unique, wait_parked, wait_until, write_config

FAST = {"backoff_initial_ms": 50, "backoff_max_ms": 200, "release_retry_ms": 50}
CONFIG_ERROR = 78  # kExitConfig: systemd does not restart the unit


def daemon_for(workdir, database, peer, **sections):
    sections.setdefault("dispatch", {}).update(FAST)
    return Daemon(write_config(f"{workdir}/outboxd.yaml", database, peer, **sections))


def fill(database, count, session=None):
    with database.writer() as conn, conn.cursor() as cur:
        for i in range(count):
            enqueue(cur, "q", f"m{i}", f"{i}".encode(), session_id=session)


def status_of(database, message_id):
    rows = database.query("SELECT status FROM outbox.messages WHERE message_id = %s", (message_id,))
    return rows[0][0] if rows else None


def published(peer, message_id):
    return [d["outcome"] for d in peer.deliveries() if d["id"] == message_id]


def one(cur, sql):
    cur.execute(sql)
    return cur.fetchone()[0]


def test_a_rejected_row_is_parked(workdir, database):
    peer = Peer(workdir, "--reject", "m0:100")
    daemon = daemon_for(workdir, database, peer, dispatch={"max_attempts": 2}).start()
    try:
        fill(database, 1)
        wait_until(lambda: status_of(database, "m0") == "parked", timeout=20, what="m0 parked")
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()
    attempts, last_error = database.query("SELECT attempts, last_error FROM outbox.messages")[0]
    assert attempts == 2
    assert "scripted reject of m0" in last_error


@pytest.mark.parametrize("mode", ["keep", "delete"])
def test_accepted_rows_are_marked_under_either_retention(workdir, database, mode):
    peer = Peer(workdir)
    daemon = daemon_for(workdir, database, peer, retention={"mode": mode}).start()
    try:
        fill(database, 5, session="s")
        wait_until(lambda: database.query("SELECT count(*) FROM outbox.messages WHERE status = 'pending'")[0][0] == 0,
                   timeout=20, what="every row marked")
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()
    rows = database.query("SELECT status, dispatched_at IS NOT NULL FROM outbox.messages")
    assert rows == ([("dispatched", True)] * 5 if mode == "keep" else [])
    assert all(published(peer, f"m{i}") == ["accepted"] for i in range(5))


def test_a_parked_row_holds_back_only_its_writers_rows_when_another_writer_shares_its_session_id(workdir, database):
    """Applications A and B both write session id order-42 (docs/security.md, writers sharing a session id).
    RabbitMQ refuses A's first row, which parks; A's later row waits behind it, B's rows go out in order,
    the one written while A's row was failing and the one written after it parked."""
    broker = Broker("rabbitmq")
    queue = unique("shared")
    app_a, app_b = database.writer_role, database.add_writer("app_b")
    consumer = Consumer(broker, queue)
    daemon = daemon_for(workdir, database, broker, dispatch={"max_attempts": 2}).start()
    try:
        with database.writer() as a, a.cursor() as cur:
            enqueue(cur, "a/b", "a-1", b"a1", session_id="order-42")  # RabbitMQ: no such address
            enqueue(cur, queue, "a-2", b"a2", session_id="order-42")
        with database.writer(role=app_b) as b, b.cursor() as cur:
            enqueue(cur, queue, "b-1", b"b1", session_id="order-42")
        wait_parked(database, "a-1")
        with database.writer(role=app_b) as b, b.cursor() as cur:
            enqueue(cur, queue, "b-2", b"b2", session_id="order-42")
            enqueue(cur, queue, "b-later", b"b3", session_id="order-42", due_at="2099-01-01T00:00:00Z")
        received = consumer.receive_all(["b-1", "b-2"], timeout=30)
        assert [(m.id, m.group_id) for m in received] == [("b-1", "order-42"), ("b-2", "order-42")]
        assert consumer.quiet_for(1.0) == [], "a-2 waits behind A's parked row"
        assert status_of(database, "a-2") == "pending"

        # The operator sees who wrote the parked row, and that only A's row waits behind it.
        config = cli_config(workdir, database)
        parked = json.loads(run_cli("parked", "--json", "--session", "order-42", "-c", config).stdout)["rows"]
        assert [(r["message_id"], r["writer"], r["waiting_behind"]) for r in parked] == [("a-1", app_a, 1)], parked

        # Each writer sees its own rows only (docs/sql.md, Roles): B cannot cancel or move A's rows, and
        # A cannot touch B's; A's row behind the timeout is due already, so it is A's to wait for, not to cancel.
        with database.writer(role=app_b) as b, b.cursor() as cur:
            assert one(cur, "SELECT outbox.cancel('a-2')") is False
            assert one(cur, "SELECT outbox.reschedule('a-2', now())") is None, "another writer's row: unknown"
        with database.writer() as a, a.cursor() as cur:
            assert one(cur, "SELECT outbox.cancel('b-later')") is False
            assert one(cur, "SELECT outbox.reschedule('a-2', now())") is False, "its own row, already due"
            assert one(cur, "SELECT outbox.cancel('a-2')") is False
        with database.writer(role=app_b) as b, b.cursor() as cur:
            assert one(cur, "SELECT outbox.cancel('b-later')") is True

        # Once the operator moves A's row to a queue that exists and requeues it, A's session resumes in order.
        database.query("UPDATE outbox.messages SET destination = %s WHERE message_id = 'a-1'", (queue,))
        run_cli("requeue", "-c", config, "a-1")
        resumed = consumer.receive_all(["a-1", "a-2"], timeout=30)
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert [m.id for m in resumed[2:]] == ["a-1", "a-2"]


def park(database, *message_ids):
    """Rows parked after ten rejections, written as the superuser (set-up, not under test)."""
    with database.connect() as conn, conn.cursor() as cur:
        for i, message_id in enumerate(message_ids):
            enqueue(cur, "q", message_id, b"x", session_id=f"s{i}")
        cur.execute("UPDATE outbox.messages SET status = 'parked', attempts = 10, last_error = 'rejected: bad' "
                    "WHERE message_id = ANY(%s)", (list(message_ids),))


def cli_config(workdir, database):
    """A config for the CLI, which never talks to the broker."""
    class NoBroker:
        url, profile, user, password = "amqp://127.0.0.1:5672", "generic", "", ""
    return write_config(f"{workdir}/cli.yaml", database, NoBroker)


def test_requeue_skip_and_status(workdir, database):
    park(database, "p1", "p2", "p3")
    config = cli_config(workdir, database)
    assert "requeue: 1 parked row" in run_cli("requeue", "-c", config, "p1").stdout
    assert "skip: 1 parked row" in run_cli("skip", "-c", config, "p2").stdout
    assert run_cli("requeue", "-c", config, "--all-parked").stdout.startswith("requeue: 1 parked row")
    assert database.query("SELECT message_id, status, attempts FROM outbox.messages ORDER BY id") == [
        ("p1", "pending", 0), ("p2", "cancelled", 10), ("p3", "pending", 0)]
    text = run_cli("status", "-c", config).stdout
    assert "(total)" in text and "q " in text
    report = json.loads(run_cli("status", "-c", config, "--json").stdout)
    assert report["total"]["pending"] == 2
    assert report["destinations"]["q"]["parked"] == 0


def test_migrate_with_the_daemons_config_only_checks_a_current_schema(workdir, database):
    out = run_cli("migrate", "-c", cli_config(workdir, database)).stdout
    assert "is up to date" in out


def test_migrate_with_the_daemons_config_cannot_install_and_says_which_role_to_use(workdir, database):
    empty = f"{database.name}_empty"
    admin = database.connect()  # autocommit, outside any `with` block: CREATE DATABASE needs that
    admin.cursor().execute(f'CREATE DATABASE "{empty}"')
    try:
        config = cli_config(workdir, database)
        with open(config) as f:
            text = f.read()
        with open(config, "w") as f:
            f.write(text.replace(f'/{database.name}"', f'/{empty}"'))  # the URL's path, not its user
        result = run_cli("migrate", "-c", config, check=False)
    finally:
        admin.cursor().execute(f'DROP DATABASE "{empty}" WITH (FORCE)')
        admin.close()
    assert result.returncode == CONFIG_ERROR, result.stderr
    assert "permission denied for database" in result.stderr
    assert "run it as a role that may create schemas" in result.stderr


def test_a_role_without_the_dispatcher_grant_exits_78_and_names_the_grant(workdir, database):
    database.query(f'REVOKE outbox_dispatcher FROM "{database.dispatcher_role}"')
    grant = f'GRANT outbox_dispatcher TO "{database.dispatcher_role}";'
    fill(database, 3)
    peer = Peer(workdir)
    daemon = daemon_for(workdir, database, peer).start()
    try:
        assert daemon.process.wait(timeout=30) == CONFIG_ERROR, daemon.log()
    finally:
        peer.stop()
    assert peer.deliveries() == []
    assert "permission denied for schema outbox" in daemon.log()
    assert grant in daemon.log()
    for command in (["status"], ["fire", "m0"]):
        result = run_cli(*command[:1], "-c", cli_config(workdir, database), *command[1:], check=False)
        assert result.returncode == CONFIG_ERROR, result.stderr
        assert "permission denied" in result.stderr and grant in result.stderr


def test_a_row_published_but_not_markable_stops_the_daemon_instead_of_publishing_it_again(workdir, database):
    """The dispatcher group lacks a grant the mark needs (as before sql/008): the row goes out once,
    the mark is refused, and the daemon exits 78 naming the fix, not 1 (restarted, publishing again)."""
    database.query("REVOKE EXECUTE ON FUNCTION outbox.text_ok(text, int) FROM outbox_dispatcher")
    peer = Peer(workdir)
    daemon = daemon_for(workdir, database, peer, retention={"mode": "keep"}).start()
    try:
        fill(database, 1)
        assert daemon.process.wait(timeout=30) == CONFIG_ERROR, daemon.log()
    finally:
        peer.stop()
    log = daemon.log()
    assert "permission denied for function text_ok" in log
    assert f'the login role "{database.dispatcher_role}" holds outbox_dispatcher' in log
    assert "run outboxd migrate" in log
    assert published(peer, "m0") == ["accepted"]
    assert status_of(database, "m0") == "pending"
