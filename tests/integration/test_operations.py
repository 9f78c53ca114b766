"""The operator's commands as the dispatcher-only role against PostgreSQL and RabbitMQ: parked, show, skip, requeue, timeline, replay, status."""

import getpass
import json
import types

from harness import Broker, Consumer, Daemon, enqueue, run_cli, unique, wait_until, write_config


def statuses(database, like="%"):
    return dict(database.query("SELECT message_id, status FROM outbox.messages WHERE message_id LIKE %s", (like,)))


def events(database, message_id):
    return database.query("SELECT action, db_role, os_user FROM outbox.row_events WHERE message_id = %s ORDER BY id",
                          (message_id,))


def cli(*args, check=True):
    return run_cli(*args, check=check)


def test_parked_rows_are_listed_shown_skipped_and_requeued_with_who_did_it(workdir, database):
    broker = Broker("rabbitmq")
    queue = unique("ops")
    # RabbitMQ refuses a link to an exchange that does not exist (amqp:not-found), which outboxd
    # takes as a rejection: the rows back off and park. A full address is the DBA's to allow
    # (docs/sql.md, destinations); a DBA corrects the rows' destination before the requeue.
    address = f"/exchange/{queue}/orders"
    database.query("UPDATE outbox.settings SET allowed_address_prefixes = '{/exchange/}'")
    config = write_config(f"{workdir}/outboxd.yaml", database, broker, retention={"mode": "keep"},
                          dispatch={"max_attempts": 2, "backoff_initial_ms": 50, "backoff_max_ms": 100})
    daemon = Daemon(config).start()
    consumer = None
    try:
        with database.writer() as conn, conn.cursor() as cur:
            for message_id, session in (("o1-a", "order-1"), ("o1-b", "order-1"), ("o1-c", "order-1"),
                                        ("o2-a", "order-2")):
                enqueue(cur, address, message_id, message_id.encode(), session_id=session)
        wait_until(lambda: statuses(database, "%-a") == {"o1-a": "parked", "o2-a": "parked"}, timeout=30,
                   what="the first row of each session parked")

        listed = json.loads(cli("parked", "--json", "-c", config).stdout)
        assert listed["matched"] == 2 and not listed["more"], listed
        first = listed["rows"][0]
        assert (first["message_id"], first["status"], first["attempts"], first["waiting_behind"]) == \
            ("o1-a", "parked", 2, 2), first
        assert first["first_failed_at"] <= first["last_failed_at"], first
        assert "amqp:not-found" in first["last_error"], first
        text = cli("parked", "-c", config).stdout
        assert text.splitlines()[0].split()[:3] == ["message", "id", "status"], text
        assert "o1-a" in text and "o2-a" in text and text.rstrip().endswith("2 rows"), text
        bounded = cli("parked", "--limit", "1", "-c", config).stdout
        assert "2 rows, 1 shown: 1 more" in bounded and "o2-a" not in bounded, bounded
        assert json.loads(cli("parked", "--json", "--session", "order-2", "-c", config).stdout)["matched"] == 1
        assert json.loads(cli("parked", "--json", "--destination", "nowhere", "-c", config).stdout)["matched"] == 0
        assert json.loads(cli("parked", "--json", "--older-than", "1h", "-c", config).stdout)["matched"] == 0
        assert cli("parked", "--older-than", "soon", "-c", config, check=False).returncode == 2

        shown = json.loads(cli("show", "--json", "o1-a", "-c", config).stdout)
        assert shown["row"]["status"] == "parked" and shown["row"]["body_bytes"] == 4, shown
        assert shown["row"]["body_preview"] == "o1-a" and "body_head" not in shown["row"], shown
        assert [e["action"] for e in shown["events"]] == ["parked"], shown
        assert shown["events"][0]["db_role"] == database.dispatcher_role, shown
        text = cli("show", "o1-a", "-c", config).stdout
        assert "history (1 event)" in text and "first_failed_at" in text and "4 bytes: o1-a" in text, text

        skipped = cli("skip", "o2-a", "-c", config)
        assert skipped.stdout == "skip: 1 parked row\n"
        assert "skip: 1 parked row cancelled: o2-a" in skipped.stderr, skipped.stderr
        assert events(database, "o2-a") == [("parked", database.dispatcher_role, None),
                                             ("skipped", database.dispatcher_role, getpass.getuser())]

        consumer = Consumer(broker, queue)
        database.query("UPDATE outbox.messages SET destination = %s WHERE destination = %s", (queue, address))
        requeued = cli("requeue", "--session", "order-1", "-c", config)
        assert "requeue: 1 parked row pending again: o1-a" in requeued.stderr, requeued.stderr
        received = consumer.receive_all(["o1-a", "o1-b", "o1-c"], timeout=60)
        assert [m.id for m in received] == ["o1-a", "o1-b", "o1-c"], "the session in order, once unblocked"
        assert events(database, "o1-a") == [("parked", database.dispatcher_role, None),
                                             ("requeued", database.dispatcher_role, getpass.getuser())]
        shown = json.loads(cli("show", "--json", "o1-a", "-c", config).stdout)
        assert shown["row"]["status"] == "dispatched" and shown["row"]["first_failed_at"] is None, shown
    finally:
        if consumer is not None:
            consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert cli("show", "nope", "-c", config, check=False).returncode == 1


def write_order(database, queue):
    """Workflow order-42 as an application writes it: placed, a timeout, a cancelled reminder, paid."""
    with database.writer() as conn, conn.cursor() as cur:
        cur.execute("SELECT workflow.start('order-42', 'order', 'Placed', 'c-42')")
        cur.execute("SELECT workflow.emit('order-42', %s, 'order-42:placed:1', '{\"order\": 42}'::jsonb)", (queue,))
        cur.execute("SELECT workflow.set_timeout('order-42', 'order-42:timeout:1', now() + interval '1 hour', %s)",
                    (queue,))
        enqueue(cur, queue, "order-42:reminder:1", b"r", session_id="order-42",
                due_at="2099-01-01T00:00:00Z")
        cur.execute("SELECT outbox.cancel('order-42:reminder:1')")
        cur.execute("SELECT workflow.emit('order-42', %s, 'order-42:paid:1', '{\"order\": 42}'::jsonb, "
                    "parent_message_id => 'order-42:placed:1')", (queue,))
        cur.execute("SELECT workflow.save('order-42', 1, 'Paid', NULL)")


def test_timeline_shows_a_session_and_replay_sends_dispatched_rows_again_in_order(workdir, database):
    broker = Broker("rabbitmq")
    queue = unique("replay")
    consumer = Consumer(broker, queue)
    config = write_config(f"{workdir}/outboxd.yaml", database, broker, retention={"mode": "keep"})
    daemon = Daemon(config).start()
    try:
        write_order(database, queue)
        first = consumer.receive_all(["order-42:placed:1", "order-42:paid:1"], timeout=30)
        wait_until(lambda: statuses(database, "%:p%:1") == {"order-42:placed:1": "dispatched",
                                                             "order-42:paid:1": "dispatched"}, what="both marked")
    finally:
        assert daemon.stop() == 0, daemon.log()
    assert [m.id for m in first] == ["order-42:placed:1", "order-42:paid:1"]

    timeline = json.loads(cli("timeline", "--json", "order-42", "-c", config).stdout)
    assert [(r["message_id"], r["state"]) for r in timeline["rows"]] == [
        ("order-42:placed:1", "dispatched"), ("order-42:timeout:1", "scheduled"),
        ("order-42:reminder:1", "cancelled"), ("order-42:paid:1", "dispatched")], timeline
    assert timeline["rows"][3]["parent_message_id"] == "order-42:placed:1", timeline
    assert {r["writer"] for r in timeline["rows"]} == {database.writer_role}, timeline
    assert [(w["id"], w["status"], w["version"]) for w in timeline["workflow_states"]] == [("order-42", "Paid", 2)]
    text = cli("timeline", "order-42", "-c", config).stdout
    assert "workflow state" in text and "Paid" in text and "4 rows" in text, text

    dry = cli("replay", "--session", "order-42", "--dry-run", "-c", config)
    assert dry.stdout.startswith("replay: 2 rows would be sent again: order-42:placed:1, order-42:paid:1\n"), dry.stdout
    unconfirmed = cli("replay", "--session", "order-42", "-c", config, check=False)
    assert unconfirmed.returncode == 2 and "run again with --yes" in unconfirmed.stdout, unconfirmed
    window = cli("replay", "--destination", queue, "--since", "1h", "--dry-run", "-c", config)
    assert window.stdout.startswith("replay: 2 rows would be sent again"), window.stdout
    assert cli("replay", "--destination", queue, "--until", "1h", "--dry-run", "-c", config,
               check=False).returncode == 1, "nothing was dispatched before an hour ago"
    assert statuses(database, "%:p%:1") == {"order-42:placed:1": "dispatched", "order-42:paid:1": "dispatched"}

    # A later row of the session, written while nothing dispatches: the replayed rows must go first.
    with database.writer() as conn, conn.cursor() as cur:
        cur.execute("SELECT workflow.emit('order-42', %s, 'order-42:shipped:1', '{}'::jsonb)", (queue,))
    replayed = cli("replay", "--session", "order-42", "--yes", "-c", config)
    assert replayed.stdout.startswith("replay: 2 rows pending again, due now: order-42:placed:1, order-42:paid:1\n")
    # The timeout and shipped:1: pending, with higher ids.
    assert "later pending rows of their sessions that wait behind them: 2\n" in replayed.stdout, replayed.stdout
    assert "replay: 2 rows pending again" in replayed.stderr, replayed.stderr
    assert [a for a, _, _ in events(database, "order-42:paid:1")] == ["replayed"]
    assert events(database, "order-42:paid:1")[0][1:] == (database.dispatcher_role, getpass.getuser())

    daemon = Daemon(config).start()
    try:
        again = consumer.receive_all(["order-42:shipped:1"], timeout=30, settle=1.0)
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    ids = [m.id for m in again]
    assert ids == ["order-42:placed:1", "order-42:paid:1", "order-42:placed:1", "order-42:paid:1",
                   "order-42:shipped:1"], "the same message ids again, in id order, before the later row"


def test_show_prints_a_hostile_body_harmlessly_and_timeline_is_bounded(workdir, database):
    # Nothing is sent here: the commands only read PostgreSQL.
    config = write_config(f"{workdir}/outboxd.yaml", database, types.SimpleNamespace(
        url="amqp://127.0.0.1:1", profile="generic", user="", password=""))
    body = b"\x1b[2J\x1b]0;owned\x07line\nbreak\xff" + b"x" * 200
    with database.writer() as conn, conn.cursor() as cur:
        enqueue(cur, "orders", "evil-1", body, session_id="evil",
                headers='{"note": "\\u001b[31mred\\u202e\\u009b"}')
        for i in range(3):
            enqueue(cur, "orders", f"evil-{i + 2}", b"x", session_id="evil")
    text = cli("show", "evil-1", "-c", config).stdout
    assert "\x1b" not in text and "\x07" not in text, repr(text)
    shown_body = next(line for line in text.splitlines() if line.startswith("body "))
    assert f"{len(body)} bytes:" in shown_body and shown_body.endswith("..."), shown_body  # the first 96 bytes
    raw = cli("show", "--json", "evil-1", "-c", config).stdout
    assert "\u202e" not in raw and "\u009b" not in raw and raw.isascii(), "no terminal control reaches stdout raw"
    shown = json.loads(raw)
    assert shown["row"]["headers"] == {"note": "\x1b[31mred\u202e\u009b"}, "--json gives values whole, JSON-escaped"
    assert "\x1b" not in shown["row"]["body_preview"]
    bounded = cli("timeline", "evil", "--limit", "2", "-c", config).stdout
    assert "4 rows, 2 shown: 2 more (raise --limit to see them)" in bounded and "evil-3" not in bounded, bounded
    gone = cli("timeline", "nobody", "-c", config, check=False)
    assert gone.returncode == 1 and "0 rows" in gone.stdout, gone


def test_status_and_timeline_print_a_hostile_destination_harmlessly_and_a_time_with_its_era(workdir, database):
    # Nothing is sent here: the commands only read PostgreSQL. U+202E turns the rest of a
    # terminal line around, U+2028 breaks it (str.splitlines() too: the output is searched whole).
    config = write_config(f"{workdir}/outboxd.yaml", database, types.SimpleNamespace(
        url="amqp://127.0.0.1:1", profile="generic", user="", password=""))
    hostile = "orders\u202esredro\u2028next"
    with database.writer() as conn, conn.cursor() as cur:
        enqueue(cur, hostile, "bidi-1", b"x", session_id="bidi", due_at="4713-11-24 00:00:00+00 BC")
    for command in (("status",), ("timeline", "bidi")):
        text = cli(*command, "-c", config).stdout
        assert "\u202e" not in text and "\u2028" not in text, (command, repr(text))
        assert "orders sredro next" in text, (command, repr(text))
    timeline = cli("timeline", "bidi", "-c", config).stdout
    assert " 4713-11-24 00:00:00Z BC " in timeline, repr(timeline)
    report = json.loads(cli("status", "--json", "-c", config).stdout)
    assert report["destinations"][hostile]["pending"] == 1, "--json gives names whole, JSON-escaped"
