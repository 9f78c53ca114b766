"""Timeouts that move: reschedule() earlier while outboxd idles or works, against the claim, `outboxd fire`, the documented recipes."""

import collections
import getpass
import os
import shutil
import subprocess
import threading
import time

import pytest

from harness import Broker, Consumer, Daemon, enqueue, run_cli, unique, wait_until, write_config


@pytest.fixture
def broker():
    return Broker("rabbitmq")


def start_daemon(workdir, database, broker):
    """outboxd with a fallback poll that never comes during a test: only a wake-up finds a moved row."""
    config = write_config(f"{workdir}/outboxd.yaml", database, broker, dispatch={"poll_interval_ms": 60000})
    run_cli("migrate", "-c", config)
    return config, Daemon(config).start()


def schedule(database, queue, message_id, due="1 hour"):
    with database.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT now() + %s::interval", (due,))
        enqueue(cur, queue, message_id, b"timeout", due_at=cur.fetchone()[0])


def reschedule(database, message_id, delay):
    """Moves the row to now() + delay s and commits; returns (moved, new due time as epoch seconds)."""
    with database.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT outbox.reschedule(%s, now() + %s * interval '1 second'), "
                    "extract(epoch FROM now() + %s * interval '1 second')::float8", (message_id, delay, delay))
        return cur.fetchone()


def attach(database, consumer, queue):
    """Sends one message first: the first row to a destination also waits for its link to attach."""
    with database.connect() as conn, conn.cursor() as cur:
        enqueue(cur, queue, unique("attach"), b"")
    consumer.receive(1, timeout=10)


def lateness_of_moved_row(database, consumer, message_id, delay):
    moved, due = reschedule(database, message_id, delay)
    assert moved is True
    [message] = consumer.receive(1, timeout=10)
    assert message.id == message_id
    return consumer.received[-1][0] - due


def test_row_moved_earlier_arrives_at_its_new_time_while_idle(workdir, database, broker):
    queue = unique("moved-idle")
    consumer = Consumer(broker, queue)
    config, daemon = start_daemon(workdir, database, broker)
    try:
        attach(database, consumer, queue)
        schedule(database, queue, "t-later")  # the daemon's next due time: an hour away
        schedule(database, queue, "t-now")
        consumer.quiet_for(1.0)  # idle, armed
        to_soon = lateness_of_moved_row(database, consumer, "t-later", 1.0)
        consumer.quiet_for(0.5)
        to_now = lateness_of_moved_row(database, consumer, "t-now", 0)
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert -0.002 <= to_soon < 0.1, f"moved to now + 1 s: arrived {to_soon:.3f} s after its new due time"
    assert -0.002 <= to_now < 0.1, f"moved to now(): arrived {to_now:.3f} s after the commit"


def test_row_moved_earlier_arrives_at_its_new_time_while_busy(workdir, database, broker):
    queue, busy_queue = unique("moved-busy"), unique("busy")
    consumer = Consumer(broker, queue)  # busy_queue fills up unread: RabbitMQ keeps it
    config, daemon = start_daemon(workdir, database, broker)
    stop = threading.Event()

    def keep_busy():
        # Not `with conn`: psycopg2 would make it one transaction.
        conn = database.connect()
        try:
            with conn.cursor() as cur:
                i = 0
                while not stop.is_set():
                    enqueue(cur, busy_queue, f"busy-{i}", b"x")
                    i += 1
        finally:
            conn.close()

    writer = threading.Thread(target=keep_busy)
    try:
        attach(database, consumer, queue)
        schedule(database, queue, "t-busy")
        writer.start()
        time.sleep(1.0)  # rows pour in: no NOTIFY, the daemon claims every busy_poll_ms
        assert database.query("SELECT bool_or(idle) FROM outbox.instances") == [(False,)], "not busy"
        lateness = lateness_of_moved_row(database, consumer, "t-busy", 1.0)
    finally:
        stop.set()
        writer.join()
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert -0.002 <= lateness < 0.1, f"arrived {lateness:.3f} s after its new due time"


def cpu_seconds(pid):
    """User and system CPU time a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The largest finite timestamptz: enqueue() and reschedule() accept it.
LARGEST_TIMESTAMP = "294276-12-31 23:59:59.999999+00"


def test_timeouts_centuries_ahead_cost_nothing_while_they_wait(workdir, database, broker):
    """A due time past the end of the daemon's clock (300 years, the largest timestamp) is a long wait, not a spin."""
    queue = unique("far")
    consumer = Consumer(broker, queue)
    config, daemon = start_daemon(workdir, database, broker)
    try:
        attach(database, consumer, queue)
        with database.writer() as conn, conn.cursor() as cur:
            cur.execute("SELECT now() + interval '300 years'")
            enqueue(cur, queue, "in-300-years", b"later", due_at=cur.fetchone()[0])
            enqueue(cur, queue, "moved-to-the-end", b"later", due_at=LARGEST_TIMESTAMP)
            enqueue(cur, queue, "moved-there", b"later", due_at="2030-01-01 00:00+00")
            cur.execute("SELECT outbox.reschedule('moved-there', %s)", (LARGEST_TIMESTAMP,))
            assert cur.fetchone()[0] is True
        time.sleep(1)  # the claims that follow the commits
        used = cpu_seconds(daemon.process.pid)
        time.sleep(4)
        used = cpu_seconds(daemon.process.pid) - used
        assert used < 0.2, f"{used:.2f} s of CPU in 4 s while every row waits for centuries"
        assert consumer.quiet_for(0.5) == []
        # Still waiting, not lost: moved to now, each arrives.
        with database.writer() as conn, conn.cursor() as cur:
            for message_id in ("in-300-years", "moved-to-the-end", "moved-there"):
                cur.execute("SELECT outbox.reschedule(%s, now())", (message_id,))
                assert cur.fetchone()[0] is True
        got = consumer.receive(3, timeout=10)
        assert sorted(m.id for m in got) == ["in-300-years", "moved-there", "moved-to-the-end"]
        assert daemon.alive()
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()


def test_rows_rescheduled_while_they_fall_due_are_sent_once_each(workdir, database, broker):
    """Each row either stays with the claim (reschedule false, or NULL once sent and deleted; sent at
    its old time) or moves (true, sent at its new time): never both, never neither."""
    queue = unique("race")
    count = 200
    consumer = Consumer(broker, queue, credit=1000)
    config, daemon = start_daemon(workdir, database, broker)
    try:
        with database.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT now() + interval '1.5 seconds'")
            due = cur.fetchone()[0]
            for i in range(count):
                # Spread over 200 ms, so that the reschedules below meet rows in every state.
                cur.execute("SELECT %s::timestamptz + %s * interval '1 millisecond'", (due, i))
                enqueue(cur, queue, f"race-{i}", b"x", due_at=cur.fetchone()[0])
        wait_until(lambda: time.time() >= due.timestamp() - 0.1, timeout=5)
        answers = {}
        with database.connect() as conn, conn.cursor() as cur:
            # About 2 ms apart: the reschedules walk along the rows as they fall due and are claimed.
            for i in range(count):
                cur.execute("SELECT outbox.reschedule(%s, now() + interval '1 second')", (f"race-{i}",))
                answers[f"race-{i}"] = cur.fetchone()[0]
                time.sleep(0.002)
        consumer.receive(count, timeout=20)
        extra = consumer.quiet_for(1.5)
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    sent = collections.Counter(message.id for _, message in consumer.received)
    assert extra == []
    assert set(sent) == set(answers), "a row was lost"
    assert max(sent.values()) == 1, f"sent twice: {[i for i, n in sent.items() if n > 1]}"
    # False: due or in flight; None: sent and already deleted (retention mode delete).
    assert True in answers.values() and {False, None} & set(answers.values()), "the race did not happen"


def test_fire_makes_a_timeout_due_now_and_says_who_and_when(workdir, database, broker):
    queue = unique("fire")
    consumer = Consumer(broker, queue)
    config, daemon = start_daemon(workdir, database, broker)
    try:
        attach(database, consumer, queue)
        schedule(database, queue, "t-fire")
        schedule(database, queue, "t-session-1")
        with database.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT now() + interval '1 hour'")
            enqueue(cur, queue, "t-session-2", b"x", session_id="s-1", due_at=cur.fetchone()[0])
        consumer.quiet_for(1.0)
        fired = run_cli("fire", "-c", config, "t-fire")
        started = time.time()
        [message] = consumer.receive(1, timeout=10)
        latency = consumer.received[-1][0] - started
        by_session = run_cli("fire", "-c", config, "--session", "s-1")
        [session_message] = consumer.receive(1, timeout=10)
        again = run_cli("fire", "-c", config, "t-fire", check=False)
        usage = run_cli("fire", "-c", config, check=False)
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert message.id == "t-fire"
    assert latency < 0.1, f"sent {latency:.3f} s after outboxd fire returned"
    assert "t-fire: 1 scheduled row due now (" in fired.stdout
    assert f"by database role {database.dispatcher_role})" in fired.stdout
    assert session_message.id == "t-session-2"
    assert "session s-1: 1 scheduled row due now" in by_session.stdout
    assert again.returncode == 1 and "fire: 0 scheduled rows" in again.stdout
    assert usage.returncode == 2
    assert database.query("SELECT status FROM outbox.messages WHERE message_id = 't-session-1'") == [("pending",)]
    # The database records each fire, with the login role and the OS user the CLI names.
    assert database.query("SELECT action, db_role, os_user FROM outbox.row_events WHERE message_id = 't-fire'") == [
        ("fired", database.dispatcher_role, getpass.getuser())]


def documented_block(language):
    """The ```language block of docs/sql.md, "Timeouts in integration tests"."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "sql.md")) as f:
        section = f.read().split("### Timeouts in integration tests", 1)[1].split("\n### ", 1)[0]
    return section.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def test_documented_recipes_fire_a_timeout(workdir, database, broker):
    """The psql and Python recipes of docs/sql.md, run as written."""
    queue = unique("recipes")
    consumer = Consumer(broker, queue)
    config, daemon = start_daemon(workdir, database, broker)
    try:
        attach(database, consumer, queue)
        with database.connect() as conn, conn.cursor() as cur:
            for workflow in ("order-42", "order-43"):
                cur.execute("SELECT workflow.start(%s, 'order', 'AwaitingPayment')", (workflow,))
                cur.execute("SELECT workflow.set_timeout(%s, %s, now() + interval '1 day', %s, 'late')",
                            (workflow, f"{workflow}:payment-timeout:1", queue))
        # As the superuser, who wrote the rows (reschedule() moves only the caller's) and may read
        # outbox.messages in the recipes' checks, which a writer may not.
        psql = subprocess.run(["psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", database.superuser_url],
                              input=documented_block("sql"), capture_output=True, text=True, timeout=60)
        assert psql.returncode == 0, psql.stderr
        assert psql.stdout.split() == ["t", "AwaitingPayment"]
        [first] = consumer.receive(1, timeout=10)

        recipe = {}
        exec(documented_block("python"), recipe)
        recipe["fire_timeout"](database.superuser_url, "order-43:payment-timeout:1",
                               "SELECT count(*) = 0 FROM outbox.messages "
                               "WHERE message_id = 'order-43:payment-timeout:1' AND status = 'pending'")
        [second] = consumer.receive(1, timeout=10)
        with pytest.raises(LookupError):  # sent, and deleted by the default retention
            recipe["fire_timeout"](database.superuser_url, "order-43:payment-timeout:1", "SELECT true")
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert (first.id, second.id) == ("order-42:payment-timeout:1", "order-43:payment-timeout:1")


@pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="needs node and npm")
def test_documented_node_recipe_fires_a_timeout(workdir, database, broker):
    """The Node recipe of docs/sql.md, with `pg` installed from npm into the test's own directory."""
    npm = subprocess.run(["npm", "install", "--prefix", workdir, "--no-audit", "--no-fund", "--silent", "pg@8"],
                         capture_output=True, text=True, timeout=300)
    assert npm.returncode == 0, npm.stderr
    script = os.path.join(workdir, "fire_timeout.js")
    with open(script, "w") as f:
        f.write(documented_block("js"))
        f.write("fireTimeout(...process.argv.slice(2)).then(() => console.log('fired'), (error) => {\n"
                "  console.error(error.message);\n  process.exit(1);\n});\n")
    queue = unique("node")
    consumer = Consumer(broker, queue)
    config, daemon = start_daemon(workdir, database, broker)
    try:
        attach(database, consumer, queue)
        schedule(database, queue, "t-node")
        node = subprocess.run(["node", script, database.superuser_url, "t-node",  # as above: the rows' writer
                               "SELECT count(*) = 0 FROM outbox.messages WHERE message_id = 't-node'"],
                              capture_output=True, text=True, timeout=60)
        [message] = consumer.receive(1, timeout=10)
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert node.returncode == 0, node.stderr
    assert node.stdout.strip() == "fired"
    assert message.id == "t-node"
