"""The soak of tests/soak/run.sh with small counts: kill -9s, a broker restart, a primary restart, a failover.

The same code as the full soak, so that it cannot rot: its own RabbitMQ node
(scripts/services.sh in the test's directory; it is restarted) and its own
primary and standby; 0 lost, 0 phantoms, per-session order kept, duplicates
within the bound, backlog zero, RSS flat over the daemon's last life.
"""

import os
import subprocess
import sys

import pytest

from harness import REQUIRED

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "soak"))

import soak  # noqa: E402


@pytest.fixture
def own_rabbitmq(workdir, monkeypatch):
    """A RabbitMQ node of the test's own; the harness's broker variables point at it meanwhile."""
    services_sh = os.path.join(ROOT, "scripts", "services.sh")
    scratch = os.path.join(workdir, "services")
    env = dict(os.environ, OUTBOXD_SCRATCH=scratch, OUTBOXD_SERVICES="rabbitmq")
    try:
        subprocess.run([services_sh, "start"], env=env, check=True, timeout=400, stdout=subprocess.DEVNULL)
        exported = subprocess.run(["bash", "-c", f"source {scratch}/services.env && env -0"], check=True,
                                  capture_output=True, text=True).stdout
        for line in exported.split("\0"):
            name, _, value = line.partition("=")
            if name.startswith("OUTBOXD_TEST_RABBITMQ_") or name in ("OUTBOXD_SCRATCH", "OUTBOXD_SERVICES_SH"):
                monkeypatch.setenv(name, value)
        yield services_sh, scratch
    finally:
        subprocess.run([services_sh, "clean"], env=env, timeout=300, stdout=subprocess.DEVNULL)


def test_soak_with_small_counts(own_rabbitmq):
    consumer = os.environ.get("OUTBOXD_SOAK_CONSUMER", os.path.join(ROOT, "build", "bench", "latency_consumer"))
    if not os.access(consumer, os.X_OK):
        (pytest.fail if REQUIRED else pytest.skip)(f"no consumer at {consumer}: build the latency_consumer target")
    services_sh, scratch = own_rabbitmq
    options = soak.Options(rows=6000, kills=3, broker_restarts=1, pg_restarts=1, failovers=1, writers=2,
                           sessions=20, batch=20, rate=400, kill_span=0.3, in_flight=32, batch_size=16, rss_warmup=5,
                           consumer=consumer, services_sh=services_sh, scratch=scratch)
    assert soak.soak(options) == 0, "the soak broke a guarantee (its table above says which)"
