#!/usr/bin/python3
"""Reads the demo's queues and summarises what arrived: counts, order per session, timeout punctuality.

usage: demo_consumer.py URL USER PASSWORD SECONDS_OF_SILENCE QUEUE...
"""

import sys
import time

from proton import Terminus
from proton.handlers import MessagingHandler
from proton.reactor import Container


class Reader(MessagingHandler):
    """Reads every queue until nothing arrived for `silence` seconds."""

    def __init__(self, url, user, password, silence, queues):
        super().__init__(prefetch=1000)
        self.url, self.user, self.password = url, user, password
        self.silence, self.queues = silence, queues
        self.arrivals = []
        self.last = time.time()
        self.connection = None

    def on_start(self, event):
        self.connection = event.container.connect(self.url, user=self.user, password=self.password,
                                                  allowed_mechs="PLAIN")
        for queue in self.queues:
            # A durable source, as outboxd's durable target declares the queue.
            receiver = event.container.create_receiver(self.connection, f"/queue/{queue}", name=queue)
            receiver.source.durability = Terminus.DELIVERIES
        print(f"consumer: reading {', '.join(self.queues)}", flush=True)
        event.container.schedule(0.25, self)

    def on_message(self, event):
        self.arrivals.append((time.time(), event.link.name, event.message))
        self.last = time.time()

    def on_timer_task(self, event):
        if time.time() - self.last >= self.silence:
            self.connection.close()
        else:
            event.container.schedule(0.25, self)


def main():
    url, user, password, silence, *queues = sys.argv[1:]
    reader = Reader(url, user, password, float(silence), queues)
    Container(reader).run()
    arrivals = reader.arrivals

    print(f"\nconsumer: {len(arrivals)} messages received")
    for queue in queues:
        print(f"  {queue}: {sum(1 for _, q, _ in arrivals if q == queue)}")
    order_ok, last_seq = True, {}
    for _, _, m in arrivals:
        props = m.properties or {}
        if "seq" in props:
            if props["seq"] <= last_seq.get(m.group_id, -1):
                order_ok = False
            last_seq[m.group_id] = props["seq"]
    print(f"  per-session order over {len(last_seq)} sessions: {'intact' if order_ok else 'VIOLATED'}")
    for t, _, m in arrivals:
        props = m.properties or {}
        if "due_epoch" in props:
            print(f"  {m.id}: due {props['due_epoch']:.3f}, arrived {t - props['due_epoch'] :+.3f} s after due_at")
    return 0 if order_ok else 1


if __name__ == "__main__":
    sys.exit(main())
