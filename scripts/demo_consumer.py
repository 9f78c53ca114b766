#!/usr/bin/python3
"""Reads the demo's queues and tells what arrived: counts, order per session, scheduled punctuality.

usage: demo_consumer.py URL USER PASSWORD EXPECTED --absent MESSAGE_ID QUEUE...

Reads until EXPECTED messages arrived and then a second passed without another
(a late duplicate or a cancelled message would show up then), or until 60 s
passed. Exit status 0 when everything expected arrived, in order, and no
--absent message did.
"""

import argparse
import sys
import time

from proton import Terminus
from proton.handlers import MessagingHandler
from proton.reactor import Container

QUIET_S = 1.0
GIVE_UP_S = 60.0


class Reader(MessagingHandler):
    """Reads every queue until the expected count arrived and the queues went quiet."""

    def __init__(self, args):
        super().__init__(prefetch=1000)
        self.args = args
        self.arrivals = []
        self.started = self.last = time.time()
        self.connection = None
        self.opened = 0

    def on_start(self, event):
        self.connection = event.container.connect(self.args.url, user=self.args.user,
                                                  password=self.args.password, allowed_mechs="PLAIN")
        for queue in self.args.queues:
            # A durable source, as outboxd's durable target declares the queue.
            receiver = event.container.create_receiver(self.connection, f"/queue/{queue}", name=queue)
            receiver.source.durability = Terminus.DELIVERIES
        event.container.schedule(0.1, self)

    def on_link_opened(self, event):
        self.opened += 1
        if self.opened == len(self.args.queues):
            print("consumer: ready", flush=True)  # demo.sh waits for this line before writing

    def on_message(self, event):
        self.arrivals.append((time.time(), event.link.name, event.message))
        self.last = time.time()

    def on_timer_task(self, event):
        now = time.time()
        done = len(self.arrivals) >= self.args.expected and now - self.last >= QUIET_S
        if done or now - self.started >= GIVE_UP_S:
            self.connection.close()
        else:
            event.container.schedule(0.1, self)


def order_violations(arrivals):
    """Sessions whose messages arrived out of their `seq` order, and the number of sessions checked."""
    last, broken = {}, set()
    for _, _, m in arrivals:
        seq = (m.properties or {}).get("seq")
        if seq is None:
            continue
        if seq <= last.get(m.group_id, -1):
            broken.add(m.group_id)
        last[m.group_id] = seq
    return broken, len(last)


def report(args, arrivals):
    """Prints the summary; returns whether everything was as expected."""
    ok = True
    per_queue = ", ".join(f"{q} {sum(1 for _, name, _ in arrivals if name == q)}" for q in args.queues)
    print(f"  arrived:    {len(arrivals)} of {args.expected} messages ({per_queue})")
    ok &= len(arrivals) == args.expected
    broken, sessions = order_violations(arrivals)
    print(f"  order:      {'intact' if not broken else f'BROKEN in {len(broken)}'} in each of {sessions} sessions")
    ok &= not broken
    late = [t - m.properties["due_epoch"] for t, _, m in arrivals if "due_epoch" in (m.properties or {})]
    if late:
        print(f"  scheduled:  {len(late)} arrived {min(late):+.2f} to {max(late):+.2f} s after their due_at")
    for message_id in args.absent:
        came = any(m.id == message_id for _, _, m in arrivals)
        print(f"  cancelled:  {message_id} {'ARRIVED' if came else 'never arrived'}")
        ok &= not came
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("user")
    p.add_argument("password")
    p.add_argument("expected", type=int)
    p.add_argument("--absent", action="append", default=[], metavar="MESSAGE_ID")
    p.add_argument("queues", nargs="+")
    args = p.parse_args()
    reader = Reader(args)
    Container(reader).run()
    return 0 if report(args, reader.arrivals) else 1


if __name__ == "__main__":
    sys.exit(main())
