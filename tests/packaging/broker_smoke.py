#!/usr/bin/python3
"""Checks that the services started by scripts/services.sh answer: PostgreSQL, and an AMQP 1.0
round trip (PLAIN and ANONYMOUS, plus a refused wrong password) on RabbitMQ and Artemis.

Reads the services.env variables; a service whose URL is unset is skipped.
Exit status 0 when every present service works. Output ends in 'N passed, N failed'.
"""
import os
import subprocess
import sys
import uuid

from proton import Data, Message
from proton.reactor import LinkOption
from proton.utils import BlockingConnection


class QueueCapability(LinkOption):
    """Asks the broker for an anycast queue (Artemis); RabbitMQ ignores it."""

    def apply(self, link):
        terminus = link.target if link.is_sender else link.source
        terminus.capabilities.put_array(False, Data.SYMBOL)
        terminus.capabilities.enter()
        terminus.capabilities.put_symbol("queue")
        terminus.capabilities.exit()


def connect(url, user=None, password=None):
    if user is None:
        return BlockingConnection(url, timeout=20, allowed_mechs="ANONYMOUS")
    return BlockingConnection(url, timeout=20, user=user, password=password,
                              allowed_mechs="PLAIN", allow_insecure_mechs=True)


def round_trip(url, address, user=None, password=None):
    conn = connect(url, user, password)
    try:
        receiver = conn.create_receiver(address, options=QueueCapability())
        sender = conn.create_sender(address, options=QueueCapability())
        sent = [str(uuid.uuid4()) for _ in range(3)]
        for body in sent:
            sender.send(Message(id=body, body=body.encode(), durable=True))
        got = []
        for _ in sent:
            msg = receiver.receive(timeout=20)
            receiver.accept()
            got.append(msg.id)
        if got != sent:
            raise AssertionError(f"sent {sent}, received {got}")
    finally:
        conn.close()


def refused(url, user, password):
    try:
        connect(url, user, password).close()
    except Exception:  # noqa: BLE001 - any failure to open is the expected outcome
        return
    raise AssertionError("a wrong password was accepted")


def check_pg():
    out = subprocess.run(["psql", "-X", "-Atc", "select version()", os.environ["OUTBOXD_TEST_PG_URL"]],
                         check=True, capture_output=True, text=True).stdout
    if "PostgreSQL 15" not in out:
        raise AssertionError(out)


def main():
    checks = []
    if os.environ.get("OUTBOXD_TEST_PG_URL"):
        checks.append(("pg select", check_pg))
    for name, address in (("RABBITMQ", "/queue/outboxd-smoke"), ("ARTEMIS", "outboxd-smoke")):
        url = os.environ.get(f"OUTBOXD_TEST_{name}_URL")
        if not url:
            continue
        user = os.environ[f"OUTBOXD_TEST_{name}_USER"]
        password = os.environ[f"OUTBOXD_TEST_{name}_PASSWORD"]
        label = name.lower()
        checks.append((f"{label} PLAIN round trip", lambda u=url, a=address, n=user, p=password: round_trip(u, a, n, p)))
        checks.append((f"{label} ANONYMOUS round trip", lambda u=url, a=address: round_trip(u, a)))
        checks.append((f"{label} wrong password refused", lambda u=url, n=user: refused(u, n, "wrong")))
    passed = failed = 0
    for label, check in checks:
        try:
            check()
            passed += 1
            print(f"ok   {label}")
        except Exception as exc:  # noqa: BLE001 - report every failure, keep going
            failed += 1
            print(f"FAIL {label}: {exc!r}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not checks else 0


if __name__ == "__main__":
    sys.exit(main())
