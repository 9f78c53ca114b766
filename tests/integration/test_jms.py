"""A JMS application (Apache Qpid JMS) on Artemis: the fields it sees, and session order across competing consumers."""

import base64
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))

from clients import Writer, jms_classpath  # noqa: E402
from harness import Broker, Daemon, _started, run_cli, unique, wait_until, write_config  # noqa: E402

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def migrate_artemis(workdir, database):
    """Config for the artemis profile, migrated; returns (config path, writer)."""
    broker = Broker("artemis")
    path = write_config(f"{workdir}/outboxd.yaml", database, broker)
    run_cli("migrate", "-c", path)
    return path, Writer(database)


def java(*args, **popen):
    command = ["java", "-cp", jms_classpath(), "OutboxConsumer", *args]
    if popen:
        process = subprocess.Popen(command, **popen)
        _started.append(process)
        return process
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


def enqueue(cur, body_sql, body, **columns):
    names = ", ".join(f"{n} => %s" for n in columns)
    cur.execute(f"SELECT outbox.enqueue({names}, body => {body_sql})", [*columns.values(), body])
    return cur.fetchone()[0]


def test_a_jms_application_sees_every_mapped_field(workdir, database):
    path, writer = migrate_artemis(workdir, database)
    queue = unique("jms_fields")
    headers = {"tenant": "acme", "priority": 5, "ratio": 0.5, "urgent": True}
    try:
        with writer.connect() as conn, conn.cursor() as cur:
            enqueue(cur, "%s", b"\x00\x01\xfe\xffraw", destination=queue, message_id="order-7:bytes:1",
                    session_id="order-7", correlation_id="corr-7", subject="OrderPlaced",
                    content_type="application/octet-stream", headers=json.dumps(headers), ttl="90 seconds",
                    parent_message_id="order-7:place:1", originating_message_id="order-7:start:1",
                    traceparent=TRACEPARENT)
            enqueue(cur, "%s::jsonb", '{"orderId": 7}', destination=queue, message_id="order-7:json:2",
                    session_id="order-7")
            enqueue(cur, "%s::text", "plain words", destination=queue, message_id="order-8:text:1",
                    content_type="text/plain; charset=utf-8")
            enqueue(cur, "%s", b"\xffno type", destination=queue, message_id="order-8:untyped:2")
        created = {r[0]: r[1] for r in database.query(
            "SELECT message_id, floor(extract(epoch FROM created_at) * 1000)::bigint FROM outbox.messages")}
        daemon = Daemon(path).start()
        result = java("fields", queue, "4")
    finally:
        writer.drop()
    assert daemon.stop() == 0, daemon.log()
    assert result.returncode == 0, result.stderr
    got = [json.loads(line) for line in result.stdout.splitlines()]
    print("\n".join(json.dumps(m, sort_keys=True) for m in got))
    first, second, third, fourth = (next(m for m in got if m["JMSMessageID"].endswith(i))
                                    for i in ("order-7:bytes:1", "order-7:json:2", "order-8:text:1",
                                              "order-8:untyped:2"))

    # A string message-id that lacks JMS's "ID:" prefix reads back with Qpid JMS's marker for that.
    assert first["JMSMessageID"] == "ID:AMQP_NO_PREFIX:order-7:bytes:1"
    assert first["JMSCorrelationID"] == "corr-7"
    assert first["JMSType"] == "OrderPlaced"  # Qpid JMS maps JMSType to the AMQP subject
    assert first["JMSTimestamp"] == created["order-7:bytes:1"]
    # outboxd sends header.ttl, no absolute-expiry-time: JMSExpiration counts the 90 s from the
    # message's arrival (here seconds after created_at), not from created_at.
    assert first["JMSExpiration"] > first["JMSTimestamp"] + 90_000
    assert abs(first["JMSExpiration"] - (first["received_at"] + 90_000)) < 2_000
    assert first["JMSDeliveryMode"] == 2  # DeliveryMode.PERSISTENT: header.durable
    assert first["class"] == "BytesMessage"
    assert base64.b64decode(first["body"]["base64"]) == b"\x00\x01\xfe\xffraw"
    props = first["properties"]
    # The content-type has no JMS field: it shows only in the message class (below).
    assert set(props) == {"JMSXGroupID", "JMSXDeliveryCount", "_AMQ_DUPL_ID", *headers, "parent_message_id",
                          "originating_message_id", "traceparent", "outboxd_writer"}
    assert props["JMSXDeliveryCount"] == {"type": "Integer", "value": 1}
    # The artemis profile's duplicate detection property, visible to the application.
    # The message id and its writer: ids are each writer's own.
    assert props["_AMQ_DUPL_ID"] == {"type": "String", "value": "order-7:bytes:1\x1f" + writer.role}
    assert props["outboxd_writer"] == {"type": "String", "value": writer.role}
    assert props["JMSXGroupID"] == {"type": "String", "value": "order-7"}
    assert props["tenant"] == {"type": "String", "value": "acme"}
    assert props["priority"] == {"type": "Long", "value": 5}
    assert props["ratio"] == {"type": "Double", "value": 0.5}
    assert props["urgent"] == {"type": "Boolean", "value": True}
    assert props["parent_message_id"] == {"type": "String", "value": "order-7:place:1"}
    assert props["originating_message_id"] == {"type": "String", "value": "order-7:start:1"}
    assert props["traceparent"] == {"type": "String", "value": TRACEPARENT}

    # A jsonb body (content-type application/json) is a TextMessage in Qpid JMS, as text/* is.
    assert second["class"] == "TextMessage" and json.loads(second["body"]["text"]) == {"orderId": 7}
    assert second["JMSType"] is None and second["JMSCorrelationID"] is None
    assert second["JMSExpiration"] == 0  # no ttl
    assert second["properties"]["JMSXGroupID"]["value"] == "order-7"
    assert third["class"] == "TextMessage" and third["body"]["text"] == "plain words"
    assert "JMSXGroupID" not in third["properties"]  # no session_id, no group-id
    # Without a content type the body is bytes.
    assert fourth["class"] == "BytesMessage" and base64.b64decode(fourth["body"]["base64"]) == b"\xffno type"


def start_group_consumer(workdir, queue, name, *close):
    out = open(os.path.join(workdir, f"{name}.jsonl"), "w")
    process = java("group", queue, name, *close, stdin=subprocess.PIPE, stdout=out,
                   stderr=subprocess.STDOUT, text=True)
    out.close()
    return process


def lines(workdir, name):
    with open(os.path.join(workdir, f"{name}.jsonl")) as f:
        return [json.loads(line) for line in f if line.startswith("{") and line.endswith("}\n")]


def test_competing_consumers_with_message_groups_keep_session_order_when_one_closes(workdir, database):
    path, writer = migrate_artemis(workdir, database)
    queue = unique("jms_groups")
    sessions, per_session, close_after, hold = 60, 50, 300, 5
    try:
        with writer.connect(autocommit=False) as conn, conn.cursor() as cur:
            for i in range(per_session):
                for s in range(sessions):
                    enqueue(cur, "%s", f"{i}".encode(), destination=queue, message_id=f"s{s}:{i}",
                            session_id=f"s{s}")
    finally:
        writer.drop()
    names = ["c1", "c2", "c3"]
    # c1 acknowledges 300 messages, receives 5 more without acknowledging them and closes.
    consumers = {"c1": start_group_consumer(workdir, queue, "c1", str(close_after), str(hold)),
                 "c2": start_group_consumer(workdir, queue, "c2"), "c3": start_group_consumer(workdir, queue, "c3")}
    wait_until(lambda: all(any(x.get("ready") for x in lines(workdir, n)) for n in names), timeout=60,
               what="three JMS consumers attached")
    daemon = Daemon(path).start()
    start = time.monotonic()
    total = sessions * per_session

    def acked():
        return sum(1 for n in names for x in lines(workdir, n) if x.get("acked"))

    try:
        wait_until(lambda: acked() >= total, timeout=120, interval=0.5, what=f"{total} acknowledgements")
        time.sleep(1)  # anything delivered twice would show now
    finally:
        for process in consumers.values():
            if process.poll() is None:
                process.stdin.close()
        codes = {n: p.wait(timeout=60) for n, p in consumers.items()}
        assert daemon.stop() == 0, daemon.log()
    elapsed = time.monotonic() - start
    assert codes == {"c1": 0, "c2": 0, "c3": 0}, [open(os.path.join(workdir, f"{n}.jsonl")).read()[-2000:]
                                                   for n in names]
    records = {n: lines(workdir, n) for n in names}
    closed_at = next(x["t"] for x in records["c1"] if x.get("closed"))
    deliveries = sorted((x for n in names for x in records[n] if "id" in x), key=lambda x: x["t"])
    for x in deliveries:
        session, seq = x["id"].removeprefix("ID:AMQP_NO_PREFIX:").split(":")
        x["session"], x["seq"] = session, int(seq)
        assert x["group"] == session

    # Every message acknowledged exactly once; only the ones c1 held were delivered twice.
    acked_ids = [x["id"] for x in deliveries if x["acked"]]
    assert len(acked_ids) == total and len(set(acked_ids)) == total
    held = {x["id"] for x in records["c1"] if x.get("acked") is False}
    assert len(held) == hold
    seen, repeated = set(), set()
    for x in deliveries:
        (repeated if x["id"] in seen else seen).add(x["id"])
    assert repeated == held
    assert all(x["redelivered"] and x["delivery_count"] == 2 for x in deliveries if x["id"] in held and
               x["consumer"] != "c1")

    # Per session, in delivery order across the consumers: first deliveries are 0, 1, 2, ... with none
    # missing, and so are the acknowledged ones; a session is with one consumer at a time and moves only
    # when c1 closes.
    violations, moved, owners = [], set(), {}
    for s in range(sessions):
        mine = [x for x in deliveries if x["session"] == f"s{s}"]
        first, once = [], set()
        for x in mine:
            if x["id"] not in once:
                once.add(x["id"])
                first.append(x["seq"])
        acks = [x["seq"] for x in mine if x["acked"]]
        if first != list(range(per_session)) or acks != list(range(per_session)):
            violations.append((s, first, acks))
        who = [x["consumer"] for x in mine]
        changes = [(a, b) for a, b in zip(who, who[1:]) if a != b]
        if changes:
            moved.add(s)
            assert changes == [("c1", changes[0][1])], f"s{s} moved {changes}"
            assert all(x["t"] > closed_at for x in mine if x["consumer"] != "c1"), f"s{s} shared while c1 was open"
        owners[s] = who[0]
    assert violations == [], violations[:3]
    per_consumer = {n: sum(1 for o in owners.values() if o == n) for n in names}
    assert all(per_consumer.values()), per_consumer  # the groups spread over all three consumers
    assert moved and all(owners[s] == "c1" for s in moved)
    print(f"JMS message groups on Artemis: {total} rows in {sessions} sessions, 3 consumers "
          f"(first sessions per consumer {per_consumer}); c1 closed after {close_after} acknowledged and {hold} "
          f"unacknowledged, its {len(moved)} sessions moved, {len(repeated)} redelivered; "
          f"{total} acknowledged once each, 0 order violations, {elapsed:.1f} s")
