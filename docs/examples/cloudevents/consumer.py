#!/usr/bin/env python3
"""Reads the CloudEvents outboxd publishes (broker.cloudevents, AMQP binary content mode), one JSON line each.

Receives with python3-qpid-proton and rebuilds each event with the CloudEvents Python SDK's AMQP binding
(pip install -r docs/examples/cloudevents/requirements.txt): `datacontenttype` comes from the AMQP
content-type, every other attribute from the application properties named cloudEvents:NAME or
cloudEvents_NAME, `data` from the body (parsed when the content type is JSON).

usage: consumer.py amqp://HOST:PORT ADDRESS COUNT
       (AMQP_USER and AMQP_PASSWORD in the environment for SASL PLAIN; ADDRESS as the broker names the queue,
       e.g. /queue/orders on RabbitMQ, orders on Artemis)
"""

import datetime
import json
import os
import sys
from urllib.parse import urlparse

from cloudevents.core.bindings.amqp import AMQPMessage, from_binary
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from proton import Terminus
from proton.reactor import ReceiverOption
from proton.utils import BlockingConnection


class DurableQueue(ReceiverOption):
    """outboxd publishes to durable queues: attach to the same (RabbitMQ declares by attach, Artemis by capability)."""

    def apply(self, receiver):
        receiver.source.durability = Terminus.DELIVERIES
        receiver.source.capabilities.put_symbol("queue")


def to_event(message):
    """The proton message as the SDK's AMQPMessage, then as a CloudEvent."""
    properties = {"content-type": message.content_type} if message.content_type else {}
    amqp = AMQPMessage(properties=properties, application_properties=dict(message.properties or {}),
                       application_data=bytes(message.body or b""))
    return from_binary(amqp, JSONFormat(), CloudEvent)


def as_json(event):
    """Attributes and data as one JSON line: times in RFC 3339, bytes as hex."""
    def plain(value):
        if isinstance(value, datetime.datetime):
            return value.isoformat()
        return value.hex() if isinstance(value, bytes) else value
    attributes = {name: plain(value) for name, value in event.get_attributes().items()}
    return json.dumps({"attributes": attributes, "data": plain(event.get_data())}, sort_keys=True)


def connect(url):
    parsed = urlparse(url)
    user = os.environ.get("AMQP_USER")
    credentials = {"user": user, "password": os.environ.get("AMQP_PASSWORD", ""), "allowed_mechs": "PLAIN"} \
        if user else {"allowed_mechs": "ANONYMOUS"}
    return BlockingConnection(f"{parsed.hostname}:{parsed.port or 5672}", timeout=30, **credentials)


def main(url, address, count):
    connection = connect(url)
    try:
        receiver = connection.create_receiver(address, credit=count, options=DurableQueue())
        for _ in range(count):
            message = receiver.receive(timeout=30)
            print(as_json(to_event(message)), flush=True)
            receiver.accept()  # settled after it was handled: nothing is lost if the print fails
    finally:
        connection.close()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[-1])
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
