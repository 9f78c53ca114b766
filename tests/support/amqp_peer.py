#!/usr/bin/python3
"""A misbehaving AMQP 1.0 broker for fault tests.

Listens on 127.0.0.1, accepts any SASL (ANONYMOUS or PLAIN), grants credit on
every link and settles each delivery as its script says: reject, release or
modify the first deliveries of chosen message ids, force-close the connection
after N deliveries, or accept. --reject-hostile rejects with a description no
broker should send: 1 MiB long, invalid UTF-8, newlines and terminal escapes;
--hostile-close gives the forced close the same description. Every delivery
and its outcome is appended to a JSON-lines log so a test can check exactly
what happened, with the client's container id and announced idle timeout.
--hold ADDRESS never settles a delivery on a link to ADDRESS (logged as
"held"): a destination whose consumer stalls, so that its deliveries wait
for an outcome that does not come.

Credit: --credit N per link, one more for each delivery settled. With
--control FILE the peer reads FILE every 20 ms: "withhold" stops topping the
credit up, "grant" gives back what was withheld, so a test can make the client
queue deliveries and later let them go at a moment of its choosing; a link opened
while withholding gets no credit until "grant".

usage: amqp_peer.py --port P --log F [--reject ID[:N]] [--reject-hostile ID[:N]]
                    [--release ID[:N]] [--modify ID[:N]] [--close-after N] [--reject-all-of-session S]
                    [--hostile-close] [--credit N] [--control FILE] [--hold ADDRESS]
"""

import argparse
import ctypes
import json
import sys
import time

from cproton import pn_connection_condition, pn_delivery_local, pn_disposition_condition
from proton import Condition, Delivery
from proton.handlers import MessagingHandler
from proton.reactor import Container


def parse_counts(values):
    """["id:3", "other"] -> {"id": 3, "other": 1}"""
    counts = {}
    for value in values or []:
        key, _, n = value.partition(":")
        counts[key] = int(n or "1")
    return counts


# Python's binding encodes every description as UTF-8; the C function takes any
# bytes, and the AMQP string it sends carries them unchecked.
PROTON = ctypes.CDLL("libqpid-proton.so.11")
HOSTILE_DESCRIPTION = (b"bad \xff\xfe\xc0\xaf bytes\nFAKE level=error forged line\x1b[2J"
                       + b"x" * (1 << 20) + b"\xe2\x82")


def set_raw_description(condition, description):
    PROTON.pn_condition_set_description(ctypes.c_void_p(int(condition)), ctypes.c_char_p(description))


class Peer(MessagingHandler):
    def __init__(self, args):
        super().__init__(auto_accept=False, prefetch=0)
        self.args = args
        self.reject = parse_counts(args.reject)
        self.reject_hostile = parse_counts(args.reject_hostile)
        self.release = parse_counts(args.release)
        self.modify = parse_counts(args.modify)
        self.close_after = args.close_after
        self.closes_left = args.close_times
        self.deliveries = 0
        self.log = open(args.log, "a", buffering=1)
        self.acceptor = None
        self.withholding = False
        self.owed = {}  # receiver link -> credit withheld from it

    def on_start(self, event):
        self.acceptor = event.container.listen(f"127.0.0.1:{self.args.port}")
        if self.args.control:
            self.obey_control()
            event.container.schedule(0.02, self)

    def on_timer_task(self, event):
        self.obey_control()
        event.container.schedule(0.02, self)

    def obey_control(self):
        try:
            with open(self.args.control) as f:
                command = f.read().strip()
        except OSError:
            command = ""
        if command == "withhold":
            self.withholding = True
        elif command == "grant" and self.withholding:
            self.withholding = False
            for link, credit in self.owed.items():
                if credit and link.state & link.LOCAL_ACTIVE:
                    link.flow(credit)
            self.owed.clear()

    def on_link_opening(self, event):
        if event.link.is_receiver:
            event.link.target.copy(event.link.remote_target)
            if self.withholding:  # "withhold" from the start: no credit until "grant"
                self.owed[event.link] = self.args.credit
            else:
                event.link.flow(self.args.credit)

    def on_message(self, event):
        message, delivery = event.message, event.delivery
        self.deliveries += 1
        outcome = "accepted"
        if self.args.hold and event.link.target.address == self.args.hold:
            self.log.write(json.dumps({"t": time.time(), "id": message.id, "outcome": "held"}) + "\n")
            event.link.flow(1)
            return
        hostile = self.take(self.reject_hostile, message.id)
        if hostile:
            delivery.local.condition = Condition("amqp:precondition-failed", "replaced below")
            outcome = "rejected"
        elif self.take(self.reject, message.id):
            delivery.local.condition = Condition("amqp:precondition-failed", "scripted reject of " + message.id)
            outcome = "rejected"
        elif self.args.reject_all_of_session and message.group_id == self.args.reject_all_of_session:
            delivery.local.condition = Condition("amqp:precondition-failed", "session refused")
            outcome = "rejected"
        elif self.take(self.release, message.id):
            outcome = "released"
        elif self.take(self.modify, message.id):
            outcome = "modified"
        close_now = self.close_after and self.closes_left != 0 and self.deliveries % self.close_after == 0
        if close_now:
            outcome = "dropped"  # no outcome: the connection dies with the delivery unsettled
        self.log.write(json.dumps({"t": time.time(), "id": message.id, "group": message.group_id,
                                   "outcome": outcome, "body": message.body.decode("latin-1")
                                   if isinstance(message.body, bytes) else str(message.body),
                                   "container": event.connection.remote_container,
                                   "idle_timeout": event.transport.remote_idle_timeout}) + "\n")
        if close_now:
            self.closes_left -= 1
            event.connection.condition = Condition("amqp:connection:forced", "scripted close")
            event.connection.close()
            if self.args.hostile_close:
                set_raw_description(pn_connection_condition(event.connection._impl), HOSTILE_DESCRIPTION)
            return
        if outcome == "accepted":
            delivery.update(Delivery.ACCEPTED)
        elif outcome == "rejected":
            delivery.update(Delivery.REJECTED)
            if hostile:
                set_raw_description(pn_disposition_condition(pn_delivery_local(delivery._impl)), HOSTILE_DESCRIPTION)
        elif outcome == "released":
            delivery.update(Delivery.RELEASED)
        else:
            delivery.update(Delivery.MODIFIED)
        delivery.settle()
        if self.withholding:
            self.owed[event.link] = self.owed.get(event.link, 0) + 1
        else:
            event.link.flow(1)

    @staticmethod
    def take(counts, key):
        left = counts.get(key, 0)
        if left <= 0:
            return False
        counts[key] = left - 1
        return True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--reject", action="append")
    parser.add_argument("--reject-hostile", action="append")
    parser.add_argument("--release", action="append")
    parser.add_argument("--modify", action="append")
    parser.add_argument("--reject-all-of-session")
    parser.add_argument("--close-after", type=int, default=0)
    parser.add_argument("--close-times", type=int, default=-1)
    parser.add_argument("--hostile-close", action="store_true")
    parser.add_argument("--credit", type=int, default=1000)
    parser.add_argument("--control")
    parser.add_argument("--hold", help="never settle deliveries to this address")
    args = parser.parse_args()
    Container(Peer(args)).run()


if __name__ == "__main__":
    sys.exit(main())
