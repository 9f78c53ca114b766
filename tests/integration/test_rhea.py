"""A Node application (rhea) on RabbitMQ: every field outboxd maps, as the application reads it."""

import base64
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))

from clients import NODE_DIR, Writer, node_modules  # noqa: E402
from harness import Broker, Daemon, run_cli, unique, write_config  # noqa: E402

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
BODY = b"\x00\x01\xfe\xff{not json}"


def test_rhea_reads_every_mapped_field(workdir, database):
    broker = Broker("rabbitmq")
    path = write_config(f"{workdir}/outboxd.yaml", database, broker)
    run_cli("migrate", "-c", path)
    destination = unique("orders")
    headers = {"tenant": "acme", "priority": 5, "ratio": 0.5, "urgent": True}
    writer = Writer(database)
    try:
        with writer.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT outbox.enqueue(destination => %s, message_id => %s, body => %s, session_id => %s, "
                        "correlation_id => %s, subject => %s, content_type => %s, headers => %s, ttl => %s, "
                        "parent_message_id => %s, originating_message_id => %s, traceparent => %s)",
                        (destination, "order-9:placed:1", BODY, "order-9", "corr-9", "OrderPlaced",
                         "application/vnd.acme+octets", json.dumps(headers), "90 seconds", "order-9:place:1",
                         "order-9:start:1", TRACEPARENT))
            cur.execute("SELECT outbox.enqueue(destination => %s, message_id => %s)", (destination, "bare:1"))
    finally:
        writer.drop()
    created = {r[0]: r[1] for r in database.query(
        "SELECT message_id, floor(extract(epoch FROM created_at) * 1000)::bigint FROM outbox.messages")}
    daemon = Daemon(path).start()
    env = dict(os.environ, NODE_PATH=node_modules())
    result = subprocess.run(["node", os.path.join(NODE_DIR, "rhea_consumer.js"), broker.address(destination), "2"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert daemon.stop() == 0, daemon.log()
    assert result.returncode == 0, result.stderr
    got = {m["message_id"]: m for m in map(json.loads, result.stdout.splitlines())}
    print("\n".join(json.dumps(m, sort_keys=True) for m in got.values()))
    assert broker.address(destination) == f"/queue/{destination}"

    m = got["order-9:placed:1"]
    assert m["correlation_id"] == "corr-9"
    assert m["group_id"] == "order-9"
    assert m["subject"] == "OrderPlaced"
    assert m["content_type"] == "application/vnd.acme+octets"
    assert m["creation_time"] == created["order-9:placed:1"]
    assert m["ttl"] == 90_000
    assert m["durable"] is True
    assert m["body"]["section"] == "data" and base64.b64decode(m["body"]["base64"]) == BODY
    assert m["application_properties"] == {**headers, "parent_message_id": "order-9:place:1",
                                           "originating_message_id": "order-9:start:1", "traceparent": TRACEPARENT,
                                           "outboxd_writer": writer.role}

    # A row with only the required columns: no optional field appears, the empty body is still one data section.
    bare = got["bare:1"]
    for field in ("correlation_id", "group_id", "subject", "content_type", "ttl"):
        assert bare.get(field) is None, field
    assert bare["application_properties"] == {"outboxd_writer": writer.role}
    assert bare["durable"] is True and bare["creation_time"] == created["bare:1"]
    assert bare["body"] == {"section": "data", "base64": ""}
