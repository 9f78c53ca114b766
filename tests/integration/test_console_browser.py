"""The console in headless Chromium as an operator uses it: log in, see the parked row, skip it, find it in the audit."""

import os
import time
from urllib.parse import quote

import pytest

import harness
from console_client import TOKEN, live, park, wait_event  # noqa: F401  (live: a fixture)
from devtools import Browser, chromium_binary
from harness import enqueue, unique

# Screenshots of the run go here when set (docs/console/ keeps those of one run), else to the test's tmp_path.
SHOTS = os.environ.get("OUTBOXD_CONSOLE_SCREENSHOTS")


@pytest.fixture
def browser():
    if not chromium_binary():
        if harness.REQUIRED:
            pytest.fail("chromium is not installed (scripts/setup.sh installs it)")
        pytest.skip("chromium is not installed")
    b = Browser()
    yield b
    b.close()


def test_an_operator_logs_in_sees_the_parked_row_skips_it_and_finds_it_in_the_audit(live, browser, tmp_path):
    database, console, _ = live
    shots = SHOTS or str(tmp_path)
    session = unique("order")
    stuck, behind = f"{session}:payment-requested:1", f"{session}:ship:1"
    park(database, session, stuck, waiting=behind)
    base = f"http://127.0.0.1:{console.port}"
    # Some traffic for the charts, sampled every second: rows sent, and rows scheduled for later.
    writer = database.writer()
    with writer.cursor() as cur:
        for i in range(300):
            enqueue(cur, "console-shipping", f"{session}:ship-{i}", b"{}", session_id=f"{session}-{i % 30}")
        for i in range(40):
            enqueue(cur, "console-timeouts", f"{session}:timeout-{i}", b"{}", due_at="2100-01-01T00:00:00Z")
    writer.close()  # a session that ends flushes its insert counts to the statistics at once
    time.sleep(3)

    browser.open(f"{base}/parked")
    assert "Log in" in browser.text()  # 401: the login form, nothing else
    assert stuck not in browser.text()
    browser.screenshot(os.path.join(shots, "login.png"))
    browser.evaluate(f"document.querySelector('input[name=token]').value = {TOKEN!r};"
                     "document.querySelector('input[name=name]').value = 'alice'")
    browser.click("form[action='/login'] button")
    overview = browser.text()
    assert "Overview" in overview and "console-orders" in overview and "alice" in overview
    assert browser.evaluate("document.querySelectorAll('svg.chart polyline').length") >= 1
    browser.screenshot(os.path.join(shots, "overview.png"))
    # The cookie is HttpOnly: the page's own script could not read it.
    assert browser.evaluate("document.cookie") == ""

    browser.open(f"{base}/parked")
    parked = browser.text()
    assert stuck in parked and "the limit of 16384 bytes" in parked
    browser.screenshot(os.path.join(shots, "parked.png"))

    encoded = quote(stuck, safe="-._~")  # as the console puts an id in a link
    browser.click(f"a[href^='/rows/{encoded}?writer=']")  # an id is its writer's: the link names whose
    assert "shown as" in browser.text() and "History" in browser.text()
    browser.screenshot(os.path.join(shots, "row.png"))

    browser.open(f"{base}/parked")
    browser.click(f"form[action='/parked/{encoded}/skip'] button")
    assert browser.evaluate("location.pathname") == "/parked"
    assert stuck not in browser.text()
    assert wait_event(database, stuck, "skipped") == [(database.dispatcher_role, "console:alice")]

    browser.open(f"{base}/sessions/{session}")
    assert "skipped" in browser.text()
    browser.screenshot(os.path.join(shots, "session.png"))

    browser.open(f"{base}/audit?session_id={session}")
    audit = browser.text()
    assert "skipped" in audit and "console:alice" in audit and database.dispatcher_role in audit
    browser.screenshot(os.path.join(shots, "audit.png"))

    # Our own pages break none of our own Content-Security-Policy.
    assert [e for e in browser.log if "Content Security Policy" in e.get("text", "")] == []
