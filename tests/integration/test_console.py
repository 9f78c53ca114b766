"""`outboxd console` against a live daemon and RabbitMQ, as the dispatcher role: login, 401, CSRF, actions, audit."""

import json
import os
import signal
import subprocess
from urllib.parse import quote

import harness
from console_client import MAX_MESSAGE_BYTES, TOKEN, Console, live, park, wait_event  # noqa: F401  (live: a fixture)
from harness import enqueue, unique, wait_parked

PAGES = ["/", "/parked", "/rows/x", "/sessions/s", "/conversations/c", "/search?q=x", "/audit",
         "/api/status", "/api/parked", "/api/rows/x", "/api/sessions/s", "/api/conversations/c", "/api/audit"]


def test_every_page_and_action_answers_401_without_the_token(live):
    _, console, _ = live
    for path in PAGES:
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"},
                        {"Cookie": "outboxd_console=0123456789abcdef"}):
            status, response_headers, body = console.request("GET", path, headers=headers)
            assert status == 401, (path, headers, status)
            assert "default-src 'none'" in response_headers["content-security-policy"]
            assert "<script" not in body
    for path in ["/parked/x/requeue", "/parked/x/skip", "/sessions/s/requeue", "/sessions/s/skip",
                 "/api/parked/x/skip"]:
        assert console.request("POST", path, form={"csrf": "x"})[0] == 401, path
    # A wrong token at login gives no cookie.
    status, headers, _ = console.request("POST", "/login", form={"token": TOKEN + "x", "name": "mallory"})
    assert status == 401 and "set-cookie" not in headers


def test_login_gives_an_httponly_samesite_strict_cookie_and_strict_headers(live):
    _, console, _ = live
    status, headers, _ = console.request("POST", "/login", form={"token": TOKEN, "name": "alice"})
    assert status == 303 and headers["location"] == "/"
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    status, headers, page = console.request("GET", "/", headers={"Cookie": cookie.split(";")[0]})
    assert status == 200
    assert headers["content-security-policy"].startswith("default-src 'none'")
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    assert "<svg" in page and "<script" not in page


def test_an_action_without_its_csrf_token_answers_403_and_changes_nothing(live):
    database, console, _ = live
    session = unique("csrf")
    park(database, session, f"{session}-1")
    cookie, csrf = console.login()
    for form in ({}, {"csrf": ""}, {"csrf": "0" * len(csrf)}):
        for path in [f"/parked/{session}-1/skip", f"/parked/{session}-1/requeue", f"/sessions/{session}/skip"]:
            status, _, _ = console.request("POST", path, headers={"Cookie": cookie}, form=form)
            assert status == 403, (path, form, status)
            # The token counts only in the form's body: a link can carry a query string.
            status, _, _ = console.request("POST", f"{path}?csrf={csrf}", headers={"Cookie": cookie}, form=form)
            assert status == 403, (path, "query string", status)
    assert database.query("SELECT status FROM outbox.messages WHERE message_id = %s", (f"{session}-1",)) == [("parked",)]
    assert database.query("SELECT count(*) FROM outbox.row_events WHERE message_id = %s AND action <> 'parked'",
                          (f"{session}-1",)) == [(0,)]


def test_requeue_and_skip_through_the_forms_are_recorded_with_the_role_and_login_name(live):
    database, console, _ = live
    session = unique("forms")
    first, second = f"{session}-1", f"{session}-2"
    park(database, session, first, waiting=second)
    cookie, csrf = console.login("alice <ops>")

    _, _, page = console.request("GET", "/parked", headers={"Cookie": cookie})
    assert f'action="/parked/{first}/requeue"' in page and f'action="/sessions/{session}/skip"' in page
    assert "alice &lt;ops&gt;" in page

    status, headers, _ = console.request("POST", f"/parked/{first}/requeue", headers={"Cookie": cookie},
                                         form={"csrf": csrf})
    assert status == 303 and headers["location"] == "/parked"
    role = database.dispatcher_role
    assert wait_event(database, first, "requeued") == [(role, "console:alice <ops>")]
    harness.wait_until(lambda: len(database.query(
        "SELECT 1 FROM outbox.row_events WHERE message_id = %s AND action = 'parked'", (first,))) == 2,
        what="the requeued row parked again (it is still too large)")

    status, headers, _ = console.request("POST", f"/sessions/{session}/skip", headers={"Cookie": cookie},
                                         form={"csrf": csrf, "writer": database.writer_role})
    assert status == 303 and headers["location"] == f"/sessions/{session}"
    assert wait_event(database, first, "skipped") == [(role, "console:alice <ops>")]
    # The session moves on: the row behind the skipped one is sent (and deleted, retention delete).
    harness.wait_until(lambda: database.query(
        "SELECT count(*) FROM outbox.messages WHERE message_id = %s", (second,)) == [(0,)], what="the next row sent")

    # The audit trail, filtered by session, as a page and as JSON.
    _, _, audit = console.request("GET", f"/audit?session_id={session}", headers={"Cookie": cookie})
    assert audit.count("console:alice &lt;ops&gt;") == 2  # requeued, then skipped
    status, _, body = console.request("GET", f"/api/audit?session_id={session}&role={role}",
                                      headers={"Cookie": cookie})
    events = json.loads(body)["events"]
    assert status == 200
    assert sorted(e["action"] for e in events) == ["parked", "parked", "requeued", "skipped"]
    assert sorted(e["action"] for e in events if e["os_user"]) == ["requeued", "skipped"]
    assert {e["session_id"] for e in events} == {session}

    _, _, timeline = console.request("GET", f"/sessions/{session}", headers={"Cookie": cookie})
    assert timeline.count(">skipped<") == 1


def test_session_wide_actions_act_on_one_writers_rows_and_the_page_names_the_writer(live):
    database, console, _ = live
    session = unique("two-writers")
    other = database.add_writer("console_b")
    park(database, session, f"{session}-a")
    with database.writer(role=other) as conn, conn.cursor() as cur:
        enqueue(cur, "console-orders", f"{session}-b", b"x" * (MAX_MESSAGE_BYTES + 1), session_id=session)
    wait_parked(database, f"{session}-b")
    cookie, csrf = console.login()
    status, _, page = console.request("GET", "/sessions/" + quote(session, safe=""), headers={"Cookie": cookie})
    assert status == 200 and f"<td>{other}</td>" in page, "a writer column"
    assert page.count('name="writer"') == 4, "requeue and skip forms for each writer's parked rows"
    status, _, _ = console.request("POST", f"/sessions/{session}/skip", headers={"Cookie": cookie},
                                   form={"csrf": csrf, "writer": other})
    assert status == 303
    statuses = dict(database.query("SELECT message_id, status::text FROM outbox.messages WHERE session_id = %s",
                                   (session,)))
    assert statuses == {f"{session}-a": "parked", f"{session}-b": "cancelled"}, "only the named writer's row"


def test_scripts_use_the_bearer_token_and_json(live):
    database, console, _ = live
    session = unique("api")
    park(database, session, f"{session}-1")
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    status, headers, body = console.request("GET", "/api/parked", headers=bearer)
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert f"{session}-1" in [row["message_id"] for row in json.loads(body)["rows"]]
    # Accept: application/json on a page's own path gives the same document.
    status, _, body = console.request("GET", "/parked", headers={**bearer, "Accept": "application/json"})
    assert status == 200 and "rows" in json.loads(body)
    status, _, body = console.request("POST", f"/api/parked/{session}-1/skip", headers=bearer, form={})
    assert status == 200 and json.loads(body) == {"action": "skip", "changed": [f"{session}-1"]}
    assert wait_event(database, f"{session}-1", "skipped") == [(database.dispatcher_role, "console:bearer token")]
    status, _, body = console.request("GET", "/api/status", headers=bearer)
    assert status == 200 and "console-orders" in json.loads(body)["destinations"]


def test_a_hostile_row_is_shown_escaped_and_its_id_reaches_its_page(live):
    database, console, _ = live
    message_id = unique("x") + "/<b>\"odd\" id"
    body = json.dumps({"note": "<script>alert(1)</script>", "n": [1, 2]}).encode()
    with database.writer() as conn, conn.cursor() as cur:
        enqueue(cur, "console-orders", message_id, body, content_type="application/json",
                due_at="2100-01-01T00:00:00Z", session_id="<img src=x onerror=alert(1)>")
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    status, _, page = console.request("GET", "/rows/" + quote(message_id, safe=""), headers=bearer)
    assert status == 200
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "shown as JSON" in page and "&quot;note&quot;" in page
    assert 'href="/sessions/%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E"' in page
    assert console.request("GET", "/rows/no-such-row", headers=bearer)[0] == 404


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def test_a_body_nested_32768_deep_is_shown_in_bounded_memory(live):
    database, console, _ = live
    message_id = unique("deep")
    body = b"[" * 32768 + b"]" * 32768  # the whole 64 KiB the console reads of a body
    with database.writer() as conn, conn.cursor() as cur:
        enqueue(cur, "console-orders", message_id, body, content_type="application/json",
                due_at="2100-01-01T00:00:00Z")
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert console.request("GET", "/rows/no-such-row", headers=bearer)[0] == 404  # the pages' own peak first
    before = peak_rss_kib(console.process.pid)
    for _ in range(4):
        status, _, page = console.request("GET", "/rows/" + quote(message_id, safe=""), headers=bearer)
        assert status == 200 and "shown as JSON" in page
    assert peak_rss_kib(console.process.pid) - before < 64 * 1024, "a page took more than 64 MiB"


def test_behind_tls_the_login_cookie_is_secure_and_host_prefixed(live, tmp_path):
    _, _, config = live
    behind = tmp_path / "behind_tls.yaml"
    behind.write_text(open(config).read().replace("console:\n", "console:\n  behind_tls: true\n", 1))
    console = Console(str(behind), str(tmp_path))
    try:
        status, headers, _ = console.request("POST", "/login", form={"token": TOKEN, "name": "alice"})
        assert status == 303
        cookie = headers["set-cookie"]
        assert cookie.startswith("__Host-outboxd_console=") and "; Secure" in cookie and "Domain" not in cookie
        assert "; Path=/" in cookie
        login = cookie.split(";")[0]
        assert console.request("GET", "/parked", headers={"Cookie": login})[0] == 200
        # The plain name, which any service on the host could set, logs no one in.
        plain = login.replace("__Host-", "", 1)
        assert console.request("GET", "/parked", headers={"Cookie": plain})[0] == 401
    finally:
        assert console.stop() == 0


def test_wrong_tokens_in_a_row_slow_logins_down(live, tmp_path):
    _, _, config = live
    token_file = open(config).read().split("token_file: ", 1)[1].split("\n", 1)[0].strip().strip('"')
    os.chmod(token_file, 0o644)  # the group and others may read it: warned at start
    try:
        console = Console(config, str(tmp_path))
    finally:
        os.chmod(token_file, 0o600)
    try:
        assert "console.token_file" in console.log() and "chmod 600" in console.log()
        for _ in range(5):
            assert console.request("POST", "/login", form={"token": TOKEN + "x", "name": "mallory"})[0] == 401
        status, headers, _ = console.request("POST", "/login", form={"token": TOKEN, "name": "alice"})
        assert status == 429 and headers["retry-after"] == "1"
        # Scripts with the token are not logins: never slowed.
        assert console.request("GET", "/api/status", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
        harness.wait_until(lambda: console.request("POST", "/login", form={"token": TOKEN, "name": "alice"})[0] == 303,
                           timeout=5, what="the login after the wait")
    finally:
        assert console.stop() == 0


def test_a_non_loopback_listen_is_refused_unless_plain_http_is_allowed_and_sighup_is_ignored(live, tmp_path):
    _, _, config = live
    result = subprocess.run([harness.OUTBOXD, "console", "-c", config, "--listen", f"0.0.0.0:{harness.free_port()}"],
                            capture_output=True, text=True, timeout=15)
    assert result.returncode == 78
    assert "not a loopback address" in result.stderr and "console.allow_plain_http" in result.stderr

    allowed = tmp_path / "allowed.yaml"
    allowed.write_text(open(config).read().replace("console:\n", "console:\n  allow_plain_http: true\n", 1))
    console = Console(str(allowed), str(tmp_path), host="0.0.0.0")
    try:
        assert "over plain HTTP" in console.log()
        # A reload signal sent to a unit's processes leaves the console serving.
        console.process.send_signal(signal.SIGHUP)
        harness.wait_until(lambda: "SIGHUP ignored" in console.log(), what="the SIGHUP logged")
        assert console.request("GET", "/login")[0] == 200
    finally:
        assert console.stop() == 0
