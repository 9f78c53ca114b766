"""The order saga example (examples/order-saga) under SIGKILLs: 1,000 orders, each ends right; timeouts fired now; one
order's conversation end to end through `outboxd timeline --correlation`."""

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import OUTBOXD, require_env, workdir  # noqa: E402,F401  (workdir is a fixture)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "order-saga")


def install_node_modules():
    """npm ci from the committed package-lock.json (node_modules is not committed)."""
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=os.path.join(EXAMPLE, "node"), check=True,
                   timeout=300)


@pytest.mark.parametrize("language", ["python", "node"])
def test_order_saga_survives_kills(workdir, language):
    # About 10% of payments come after the 2.5 s payment timeout and 3% never come;
    # outboxd is killed three times and one of the two saga processes once, each
    # with SIGKILL and started again. Five more orders are paid by a transfer that
    # never comes, with a one-hour payment timeout: driver.py fires those timeouts
    # at once with outbox.reschedule() as the saga's login role and wants the five
    # cancelled within 5 s. It checks every order (check.py) and prints the counts;
    # it exits 1 if an order is wrong or unfinished.
    require_env("OUTBOXD_TEST_PG_URL")
    require_env("OUTBOXD_TEST_RABBITMQ_URL")
    if language == "node":
        install_node_modules()
    result = subprocess.run(
        ["/usr/bin/python3", os.path.join(EXAMPLE, "driver.py"), "--language", language, "--outboxd", OUTBOXD,
         "--orders", "1000", "--per-second", "100", "--payment-timeout-ms", "2500", "--late-rate", "0.10",
         "--abandon-rate", "0.03", "--transfer-orders", "5", "--fire-within", "5", "--outboxd-kills", "3",
         "--saga-kills", "1", "--timeline", "--workdir", workdir],
        capture_output=True, text=True, timeout=240)
    print(result.stdout + result.stderr)
    if result.returncode != 0:
        for name in sorted(os.listdir(workdir)):
            if name.endswith(".log"):
                with open(os.path.join(workdir, name)) as f:
                    print(f"--- last lines of {name}\n" + "".join(f.readlines()[-15:]))
    assert result.returncode == 0, "some orders are wrong or unfinished (see above)"
    assert "kills (SIGKILL, then restarted): outboxd 3, saga process 1" in result.stdout
    assert "fired now: 5, final in " in result.stdout and ": cancelled, never paid 5\n" in result.stdout
    # The first order paid by transfer, end to end: every step, its consumers' receipts, the timeout moved to now.
    order = "order-1001"
    timeline = result.stdout.partition(f"$ outboxd timeline --correlation {order}\n")[2]
    steps = [line.split()[2:4] for line in timeline.splitlines() if line.startswith("20")]
    assert [f"{order}:placed", "written"] == steps[0], timeline
    for step in (["reserve-stock:1", "received"], ["capture-payment:1", "received"],
                 ["payment-timeout:1", "rescheduled"], ["release-stock:1", "received"]):
        assert [f"{order}:{step[0]}", step[1]] in steps, (step, timeline)
    moved = steps.index([f"{order}:payment-timeout:1", "rescheduled"])
    assert steps.index([f"{order}:release-stock:1", "written"]) > moved, timeline
    consumers = {line.split()[-1] for line in timeline.splitlines() if " received " in line}
    assert consumers == {"stock", "payments"}, timeline
    assert f"{order}  order  Cancelled" in timeline, timeline
