"""A steady application writer over several sessions, and the per-session order check of what it wrote."""

import threading
import time

import psycopg2

from harness import enqueue


class Writer(threading.Thread):
    """Commits one row per transaction, round robin over `sessions` sessions, until stopping is set.

    url is a libpq URL of a writer login role; a lost connection is opened again.
    committed: (message_id, commit time) of every commit the server confirmed.
    in_doubt:  message ids whose commit ended with the connection: they may or may not exist.
    Message ids are "<session>-<n>" with n zero-padded, so they sort in commit order.
    """

    def __init__(self, url, queue, sessions=8):
        super().__init__(daemon=True)
        self.url = url
        self.queue = queue
        self.sessions = sessions
        self.stopping = threading.Event()
        self.committed = []
        self.in_doubt = []

    def run(self):
        conn = None
        n = 0
        while not self.stopping.is_set():
            try:
                if conn is None:
                    conn = psycopg2.connect(self.url)
                    conn.autocommit = True
                session = f"s{n % self.sessions}"
                message_id = f"{session}-{n:06d}"
                n += 1
                try:
                    with conn.cursor() as cur:
                        enqueue(cur, self.queue, message_id, b"x", session_id=session)
                except psycopg2.OperationalError:
                    self.in_doubt.append(message_id)
                    raise
                self.committed.append((message_id, time.time()))
                time.sleep(0.005)
            except psycopg2.Error:
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.1)
        if conn is not None:
            conn.close()

    def stop(self):
        self.stopping.set()
        self.join(timeout=30)


def session_order_violations(deliveries, sessions):
    """Rows that reached the consumer for the first time after a later row of their session."""
    latest = {}
    violations = []
    seen = set()
    for message_id in deliveries:
        if message_id in seen:
            continue
        seen.add(message_id)
        session = sessions[message_id]
        if message_id < latest.get(session, ""):
            violations.append(message_id)
        latest[session] = max(message_id, latest.get(session, ""))
    return violations
