"""docs/examples/cloudevents/consumer.py against the daemon with broker.cloudevents on: the SDK rebuilds each event."""

import datetime
import json
import os
import subprocess
import sys
import venv

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import Broker, Daemon, enqueue, unique, write_config  # noqa: E402
from harness import database, workdir  # noqa: E402,F401  (fixtures)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "docs", "examples", "cloudevents", "consumer.py")
REQUIREMENTS = os.path.join(ROOT, "docs", "examples", "cloudevents", "requirements.txt")
PAGE = os.path.join(ROOT, "docs", "cloudevents.md")
SOURCE = "/shop/orders"


def sdk_python(workdir):
    """A venv that sees the system's proton and holds the pinned SDK from PyPI."""
    home = os.path.join(workdir, "venv")
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(home)
    python = os.path.join(home, "bin", "python3")
    subprocess.run([python, "-m", "pip", "install", "-q", "-r", REQUIREMENTS], check=True, timeout=300)
    return python


def write_rows(database, queue):
    with database.writer(autocommit=False) as conn, conn.cursor() as cur:
        enqueue(cur, queue, "order-42:created", b'{"order":42}', session_id="order-42",
                subject="com.shop.order.created", content_type="application/json",
                headers=json.dumps({"tenant": "acme", "priority": 7, "Region": "eu"}))
        enqueue(cur, queue, "order-42:shipped", b"\x00\xff", session_id="order-42", subject="com.shop.order.shipped",
                content_type="application/octet-stream")
        cur.execute("SELECT now()")
        return cur.fetchone()[0].astimezone(datetime.timezone.utc)


def test_the_example_consumer_rebuilds_every_event(workdir, database):
    broker = Broker("rabbitmq")
    python = sdk_python(workdir)
    queue = unique("cloudevents")
    config = write_config(f"{workdir}/outboxd.yaml", database, broker,
                          broker={"cloudevents": {"enabled": True, "source": SOURCE}})
    daemon = Daemon(config).start()
    try:
        created_at = write_rows(database, queue)
        env = dict(os.environ, AMQP_USER=broker.user, AMQP_PASSWORD=broker.password)
        result = subprocess.run([python, EXAMPLE, broker.url, broker.address(queue), "2"], capture_output=True,
                                text=True, timeout=60, env=env)
    finally:
        assert daemon.stop() == 0, daemon.log()
    assert result.returncode == 0, result.stderr
    created, shipped = [json.loads(line) for line in result.stdout.splitlines()]
    common = {"source": SOURCE, "specversion": "1.0", "subject": "order-42", "time": created_at.isoformat()}
    assert created == {"attributes": {**common, "id": "order-42:created", "type": "com.shop.order.created",
                                      "datacontenttype": "application/json", "tenant": "acme", "priority": 7},
                       "data": {"order": 42}}
    assert shipped == {"attributes": {**common, "id": "order-42:shipped", "type": "com.shop.order.shipped",
                                      "datacontenttype": "application/octet-stream"},
                       "data": "00ff"}


def function_text(path, name):
    """`def name(...)` and its indented body."""
    with open(path) as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {name}("))
    end = next(i for i in range(start + 1, len(lines) + 1) if i == len(lines) or not lines[i].startswith("    "))
    return lines[start:end]


def test_the_page_quotes_the_example_as_it_is():
    assert function_text(PAGE, "to_event") == function_text(EXAMPLE, "to_event")
