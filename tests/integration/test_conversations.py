"""A conversation (every row one correlation id produced) through `outboxd timeline --correlation` and the console's
/conversations/ page, as the dispatcher-only role: sessions in two destinations, a parked and requeued row, a fired
timeout, a consumer receipt, the workflow state; its bounds at 100,000 rows; hostile ids."""

import getpass
import html
import json
import os
import time
import types
from urllib.parse import quote

import pytest

import harness
from console_client import TOKEN, Console, write_token
from devtools import Browser, chromium_binary
from harness import enqueue, run_cli, write_config

# Screenshots of the run go here when set (docs/console/ keeps those of one run), else to the test's tmp_path.
SHOTS = os.environ.get("OUTBOXD_CONSOLE_SCREENSHOTS")

CONVERSATION = "conv-42"


@pytest.fixture
def config(workdir, database):
    """Nothing is sent in these tests: the commands and the console only read and act on PostgreSQL."""
    return write_config(f"{workdir}/outboxd.yaml", database,
                        types.SimpleNamespace(url="amqp://127.0.0.1:1", profile="generic", user="", password=""),
                        console={"token_file": write_token(workdir)})


def write_conversation(database):
    """Order 42 as two applications write it: the order workflow's rows in session order-42 (destination orders)
    and the payment service's in session payment-42 (destination payments), all under one correlation id."""
    with database.writer() as conn, conn.cursor() as cur:
        cur.execute("SELECT workflow.start('order-42', 'order', 'Placed', %s)", (CONVERSATION,))
        cur.execute("SELECT workflow.emit('order-42', 'orders', 'order-42:placed:1', '{\"order\": 42}'::jsonb)")
        cur.execute("SELECT workflow.set_timeout('order-42', 'order-42:transfer-timeout:1', now() + interval '1 hour', "
                    "'orders')")
        enqueue(cur, "payments", "payment-42:authorise:1", b"{}", session_id="payment-42",
                correlation_id=CONVERSATION, parent_message_id="order-42:placed:1",
                originating_message_id="order-42:placed:1")
        enqueue(cur, "unrelated", "other-1", b"{}", session_id="payment-42", correlation_id="another")
    # What the daemon and the broker would have done: placed:1 accepted, the authorisation refused until parked.
    database.query("UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() "
                   "WHERE message_id = 'order-42:placed:1'")
    database.query("UPDATE outbox.messages SET status = 'parked', attempts = 3, last_error = 'rejected: declined' "
                   "WHERE message_id = 'payment-42:authorise:1'")
    # A consumer that keeps an inbox in this database handled placed:1.
    with database.writer() as conn, conn.cursor() as cur:
        cur.execute("SELECT outbox.record_received('billing', 'order-42:placed:1', session_user)")


def timeline(config, *args):
    return json.loads(run_cli("timeline", "--json", "--correlation", *args, "-c", config).stdout)


def test_a_conversation_across_sessions_and_destinations_with_events_receipts_and_state(config, database):
    write_conversation(database)
    run_cli("requeue", "payment-42:authorise:1", "-c", config)
    run_cli("fire", "order-42:transfer-timeout:1", "-c", config)

    shown = timeline(config, CONVERSATION)
    rows = {r["message_id"]: r for r in shown["rows"]}
    assert list(rows) == ["order-42:placed:1", "order-42:transfer-timeout:1", "payment-42:authorise:1"], shown
    assert [r["id"] for r in shown["rows"]] == sorted(r["id"] for r in shown["rows"])
    assert shown["more"] is False and shown["older_before"] is None, shown
    placed = rows["order-42:placed:1"]
    assert (placed["state"], placed["session_id"], placed["destination"], placed["writer"]) == \
        ("dispatched", "order-42", "orders", database.writer_role), placed
    assert [(r["consumer"], r["writer"]) for r in placed["receipts"]] == [("billing", database.writer_role)]
    payment = rows["payment-42:authorise:1"]
    assert (payment["state"], payment["session_id"], payment["parent_message_id"],
            payment["originating_message_id"]) == ("pending", "payment-42", "order-42:placed:1",
                                                   "order-42:placed:1"), payment
    superuser = database.query("SELECT current_user")[0][0]  # who parked it here, in the daemon's stead
    assert [(e["action"], e["db_role"], e["os_user"]) for e in payment["events"]] == [
        ("parked", superuser, None), ("requeued", database.dispatcher_role, getpass.getuser())], payment
    assert "rejected: declined" in payment["events"][1]["detail"], payment
    fired = rows["order-42:transfer-timeout:1"]
    assert [e["action"] for e in fired["events"]] == ["fired"], fired
    assert [(w["id"], w["status"], w["writer"], w["timeout_message_id"]) for w in shown["workflow_states"]] == [
        ("order-42", "Placed", database.writer_role, "order-42:transfer-timeout:1")], shown

    text = run_cli("timeline", "--correlation", CONVERSATION, "-c", config).stdout
    lines = text.splitlines()
    assert lines[0] == f"conversation {CONVERSATION}: 3 rows", text
    whats = [line.split()[3] for line in lines[2:] if line.startswith("20")]  # date, time, message id, what
    assert whats.index("written") < whats.index("dispatched") < whats.index("received"), text
    assert whats.index("parked") < whats.index("requeued"), text
    assert "fired" in whats and "workflow state" in text, text
    # Another conversation's rows are not in it; one nobody wrote exits 1.
    assert [r["message_id"] for r in timeline(config, "another")["rows"]] == ["other-1"]
    assert run_cli("timeline", "--correlation", "nobody", "-c", config, check=False).returncode == 1
    assert run_cli("timeline", "-c", config, check=False).returncode != 0, "a session or --correlation is needed"
    both = run_cli("timeline", "order-42", "--correlation", CONVERSATION, "-c", config, check=False)
    assert both.returncode != 0, both.stdout
    assert run_cli("timeline", "order-42", "--before", "5", "-c", config, check=False).returncode == 2

    console = Console(config, database.workdir)
    try:
        cookie, _ = console.login()
        status, headers, page = console.request("GET", f"/conversations/{CONVERSATION}", headers={"Cookie": cookie})
        assert status == 200, page
        assert "<script" not in page and "default-src 'none'" in headers["content-security-policy"]
        assert '<ol class="timeline">' in page
        for what in ("written", "dispatched", "received", "parked", "requeued", "fired"):
            assert f"<b>{what}</b>" in page, what
        assert f'href="/rows/order-42%3Aplaced%3A1?writer={database.writer_role}"' in page, page
        assert 'href="/sessions/payment-42"' in page and 'href="/sessions/order-42"' in page, page
        status, _, document = console.request("GET", f"/api/conversations/{CONVERSATION}", headers={"Cookie": cookie})
        assert status == 200 and json.loads(document)["rows"] == shown["rows"]
        status, _, _ = console.request("GET", "/conversations/nobody", headers={"Cookie": cookie})
        assert status == 404
        status, _, _ = console.request("GET", f"/conversations/{CONVERSATION}?before=x", headers={"Cookie": cookie})
        assert status == 400
        # Reached from the overview's search box, a row's page and the list of failed rows.
        assert 'action="/search"' in console.request("GET", "/", headers={"Cookie": cookie})[2]
        for typed, found in (("order-42:placed:1", "/rows/order-42%3Aplaced%3A1"),
                             (CONVERSATION, f"/conversations/{CONVERSATION}"), ("payment-42", "/sessions/payment-42"),
                             ("", "/")):
            status, headers, _ = console.request("GET", "/search?q=" + quote(typed), headers={"Cookie": cookie})
            assert (status, headers["location"]) == (303, found), typed
        link = f'<a href="/conversations/{CONVERSATION}">{CONVERSATION}</a>'
        assert link in console.request("GET", "/rows/order-42%3Aplaced%3A1", headers={"Cookie": cookie})[2]
        database.query("UPDATE outbox.messages SET status = 'parked', attempts = 4 "
                       "WHERE message_id = 'payment-42:authorise:1'")
        assert link in console.request("GET", "/parked", headers={"Cookie": cookie})[2], "parked again"
    finally:
        console.stop()


def test_a_conversation_of_100000_rows_shows_the_newest_in_bounded_time(config, database):
    rows = 100_000
    with database.writer() as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO outbox.messages (message_id, destination, session_id, correlation_id, body) "
                    "SELECT 'big-' || i, 'orders', 'big-s' || (i %% 100), 'big', '\\x00'::bytea "
                    "FROM generate_series(1, %s) i", (rows,))
        # Other conversations around it, as a busy outbox has.
        cur.execute("INSERT INTO outbox.messages (message_id, destination, correlation_id, body) "
                    "SELECT 'noise-' || i, 'orders', 'noise-' || (i % 1000), '\\x00'::bytea "
                    "FROM generate_series(1, 100000) i")
    database.query("ANALYZE outbox.messages")
    began = time.monotonic()
    first = timeline(config, "big", "--limit", "1000")
    took = time.monotonic() - began
    ids = [r["id"] for r in first["rows"]]
    assert len(ids) == 1000 and first["more"] is True, (len(ids), first["more"])
    assert [r["message_id"] for r in first["rows"]][-1] == f"big-{rows}", "the newest rows, oldest of them first"
    assert first["older_before"] == ids[0]
    second = timeline(config, "big", "--limit", "1000", "--before", str(ids[0]))
    assert [r["id"] for r in second["rows"]][-1] < ids[0] and len(second["rows"]) == 1000 and second["more"]
    print(f"\n1,000 newest of {rows} rows of a conversation: {took * 1000:.0f} ms (the CLI's whole run)")
    assert took < 10, took

    console = Console(config, database.workdir)
    try:
        cookie, _ = console.login()
        began = time.monotonic()
        status, _, page = console.request("GET", "/conversations/big", headers={"Cookie": cookie})
        took = time.monotonic() - began
        assert status == 200
        assert page.count("<li ") == 1000, "one entry per row written, nothing else happened to them"
        assert f'href="/conversations/big?before={ids[0]}"' in page, "older rows"
        print(f"the console's page of them: {took * 1000:.0f} ms, {len(page)} bytes")
        assert took < 10, took
    finally:
        console.stop()


def test_hostile_correlation_ids_are_shown_harmlessly(config, database):
    hostile = "<img src=x onerror=alert(1)>\"'&\u202e/../%2e"
    with database.writer() as conn, conn.cursor() as cur:
        enqueue(cur, "orders", "h-1", b"{}", session_id="<b>s</b>", correlation_id=hostile)
    shown = timeline(config, hostile)
    assert [r["correlation_id"] for r in shown["rows"]] == [hostile]
    text = run_cli("timeline", "--correlation", hostile, "-c", config).stdout
    assert "\u202e" not in text and "h-1" in text, text

    console = Console(config, database.workdir)
    try:
        cookie, _ = console.login()
        status, _, page = console.request("GET", "/conversations/" + quote(hostile, safe=""),
                                          headers={"Cookie": cookie})
        assert status == 200, page
        assert "<img" not in page and "<b>s</b>" not in page and "\u202e" not in page
        assert html.escape("<img src=x onerror=alert(1)>", quote=True) in page
        assert 'href="/sessions/%3Cb%3Es%3C%2Fb%3E"' in page, page
    finally:
        console.stop()


@pytest.mark.parametrize("width, name", [(1280, "conversation.png"), (390, "conversation-phone.png")])
def test_an_operator_finds_a_conversation_from_the_search_box_in_chromium(config, database, tmp_path, width, name):
    if not chromium_binary():
        if harness.REQUIRED:
            pytest.fail("chromium is not installed (scripts/setup.sh installs it)")
        pytest.skip("chromium is not installed")
    write_conversation(database)
    run_cli("requeue", "payment-42:authorise:1", "-c", config)
    run_cli("fire", "order-42:transfer-timeout:1", "-c", config)
    console = Console(config, database.workdir)
    browser = Browser(width=width, height=900)
    try:
        base = f"http://127.0.0.1:{console.port}"
        browser.open(f"{base}/")
        browser.evaluate(f"document.querySelector('input[name=token]').value = {TOKEN!r};"
                         "document.querySelector('input[name=name]').value = 'alice'")
        browser.click("form[action='/login'] button")
        browser.evaluate(f"document.querySelector('input[name=q]').value = {CONVERSATION!r}")
        browser.click("form[action='/search'] button")
        assert browser.evaluate("location.pathname") == f"/conversations/{CONVERSATION}"
        shown = browser.text()
        for what in ("written", "dispatched", "received", "parked", "requeued", "fired", "Workflow state"):
            assert what in shown, what
        assert shown.index("received") < shown.index("requeued") < shown.index("fired"), shown
        # Readable at this width: nothing wider than the window but the tables, which scroll in their own box.
        assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), width
        browser.screenshot(os.path.join(SHOTS or str(tmp_path), name))
        assert [e for e in browser.log if "Content Security Policy" in e.get("text", "")] == []
    finally:
        browser.close()
        console.stop()
