"""broker.cloudevents on both brokers: rows written by the writer role arrive as CloudEvents in binary content
mode for the configured destination, unchanged for another, and a row without a type parks at once."""

import datetime
import json

import pytest

from harness import Broker, Consumer, Daemon, enqueue, unique, wait_parked, write_config

BROKERS = ["rabbitmq", "artemis"]
SOURCE = "https://shop.example/orders"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HEADERS = {"tenant": "acme", "priority": 7, "vip": True, "weight": 2.5, "Region": "eu", "tenant_id": "t1"}


@pytest.fixture(params=BROKERS)
def broker(request):
    return Broker(request.param)


def enqueue_order(cur, queue, message_id, **columns):
    enqueue(cur, queue, message_id, b'{"order":42}', session_id="order-42", correlation_id="corr-7",
            subject="com.shop.order.created", content_type="application/json", headers=json.dumps(HEADERS),
            traceparent=TRACEPARENT, **columns)


def write_rows(database, events_queue, plain_queue):
    """Three rows as the writer role; returns created_at of the first two (one transaction: the same now())."""
    with database.writer(autocommit=False) as conn, conn.cursor() as cur:
        enqueue_order(cur, events_queue, "order-42:created")
        enqueue_order(cur, plain_queue, "order-42:created:plain")
        enqueue(cur, events_queue, "untyped-1", b"x", session_id="untyped")
        cur.execute("SELECT now()")
        return cur.fetchone()[0]


def rfc3339(created_at):
    return created_at.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def check_event(message, created_at):
    props = message.properties
    assert props["cloudEvents:id"] == "order-42:created"
    assert props["cloudEvents:source"] == SOURCE
    assert props["cloudEvents:specversion"] == "1.0"
    assert props["cloudEvents:type"] == "com.shop.order.created"
    assert props["cloudEvents:time"] == rfc3339(created_at)
    assert props["cloudEvents:subject"] == "order-42"
    assert message.content_type == "application/json"  # datacontenttype
    assert "cloudEvents:datacontenttype" not in props
    assert message.body == b'{"order":42}'
    # Extensions: lower-case names of at most 20 characters with a string, boolean or 32-bit integer value.
    assert props["cloudEvents:tenant"] == "acme"
    assert props["cloudEvents:priority"] == 7
    assert props["cloudEvents:vip"] is True
    for moved in ("tenant", "priority", "vip"):
        assert moved not in props
    # Everything else stays a plain property, as without CloudEvents.
    assert props["weight"] == 2.5
    assert props["Region"] == "eu"
    assert props["tenant_id"] == "t1"
    assert props["traceparent"] == TRACEPARENT
    assert message.id == "order-42:created"
    assert message.subject == "com.shop.order.created"
    assert message.group_id == "order-42"
    assert message.correlation_id == "corr-7"


def check_plain(message):
    props = message.properties
    assert not [key for key in props if key.lower().startswith("cloudevents")], props
    for key, value in HEADERS.items():
        assert props[key] == value
    assert props["traceparent"] == TRACEPARENT
    assert message.id == "order-42:created:plain"
    assert message.subject == "com.shop.order.created"
    assert message.content_type == "application/json"
    assert message.body == b'{"order":42}'


def test_rows_arrive_as_cloudevents_where_configured_and_unchanged_elsewhere(workdir, database, broker):
    events_queue, plain_queue = unique("events"), unique("plain")
    events, plain = Consumer(broker, events_queue), Consumer(broker, plain_queue)
    config = write_config(f"{workdir}/outboxd.yaml", database, broker,
                          broker={"cloudevents": {"enabled": True, "source": SOURCE, "destinations": [events_queue]}})
    daemon = Daemon(config).start()
    try:
        created_at = write_rows(database, events_queue, plain_queue)
        [event] = events.receive(1, timeout=20)
        [unchanged] = plain.receive(1, timeout=20)
        parked = wait_parked(database, "untyped-1", timeout=10)
        assert events.quiet_for(0.5) == []
    finally:
        events.close()
        plain.close()
        assert daemon.stop() == 0, daemon.log()
    check_event(event, created_at)
    check_plain(unchanged)
    assert parked == [(1, "cloudevents: the row has no subject to be the event type and "
                          "broker.cloudevents.default_type is not set")]
