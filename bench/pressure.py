"""The pressure workload of bench/compare.py: a steady writer while PostgreSQL is put under the
pressures that sink queues kept in it, one phase after another.

Phases, PHASE seconds each: baseline; idle_in_tx (a transaction holding an xid, so vacuum
can remove nothing); readers (4 overlapping REPEATABLE READ readers rescanning the outbox);
overload (1.5x the rate); backend_kill (pg_terminate_backend of the daemon's connections
every second); pool_exhausted (every connection slot but 3 taken); restart (PostgreSQL
restarted at the phase's start); recovery (nothing). Per phase: completion (rows
delivered during the phase / rows written during it, and that over baseline's), the
commit->consumer p50/p99 of the phase's rows, the outbox's dead tuples at its end and the
daemon's mean claim time. At the end: rows lost (committed, never delivered), duplicates
(delivered twice), and whether the daemon ran throughout.
"""

import subprocess
import threading
import time
import urllib.request

import psycopg2

PHASES = ("baseline", "idle_in_tx", "readers", "overload", "backend_kill", "pool_exhausted", "restart", "recovery")
WRITER_THREADS = 4
READERS = 4


class Writer:
    """WRITER_THREADS connections of the writer role enqueueing at a paced rate; every row's
    message id names its phase. A row whose commit failed is in doubt, not written."""

    def __init__(self, url, destination):
        self.url, self.destination = url, destination
        self.rate, self.phase = 0.0, "baseline"
        self.written, self.in_doubt = [], set()  # (message id, commit time)
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(n,)) for n in range(WRITER_THREADS)]

    def start(self, rate):
        self.rate = rate
        for t in self.threads:
            t.start()

    def run(self, n):
        conn, next_at, count = None, time.monotonic(), 0
        while not self.stop.is_set():
            next_at += WRITER_THREADS / self.rate
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            message_id = f"{self.phase}:{n}:{count}"
            count += 1
            try:
                if conn is None:
                    conn = psycopg2.connect(self.url, connect_timeout=2)
                    conn.autocommit = True
                with conn.cursor() as cur:
                    cur.execute("SELECT outbox.enqueue(destination => %s, message_id => %s, session_id => %s, "
                                "body => convert_to(extract(epoch from clock_timestamp())::text, 'UTF8'))",
                                (self.destination, message_id, f"s{count % 100}"))
                with self.lock:
                    self.written.append((message_id, time.time()))
            except psycopg2.Error:
                with self.lock:
                    self.in_doubt.add(message_id)
                conn = None
                next_at = time.monotonic() + 0.1  # the database is away: try again shortly, not in a burst
        if conn is not None:
            conn.close()

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join()


class Stress:
    """What one phase does to the database, started and stopped around it."""

    def __init__(self, admin_url, db, services_sh):
        self.admin_url, self.db, self.services_sh = admin_url, db, services_sh
        self.stop, self.threads, self.conns = threading.Event(), [], []

    def begin(self, phase):
        self.stop.clear()
        if phase == "idle_in_tx":
            conn = psycopg2.connect(self.db.superuser_url)
            conn.cursor().execute("SELECT txid_current()")  # BEGIN is implicit: the xid stays open
            self.conns.append(conn)
        elif phase == "readers":
            for n in range(READERS):
                self.spawn(self.reader, n)
        elif phase == "backend_kill":
            self.spawn(self.killer)
        elif phase == "pool_exhausted":
            self.exhaust_pool()
        elif phase == "restart":
            subprocess.run([self.services_sh, "restart-pg"], check=True, capture_output=True, timeout=120)

    def spawn(self, target, *args):
        t = threading.Thread(target=target, args=args)
        t.start()
        self.threads.append(t)

    def reader(self, n):
        """Transactions of 8 s, staggered, rescanning the outbox every second."""
        time.sleep(n * 2)
        while not self.stop.is_set():
            conn = psycopg2.connect(self.db.superuser_url)
            conn.set_session(isolation_level="REPEATABLE READ")
            cur = conn.cursor()
            until = time.monotonic() + 8
            while time.monotonic() < until and not self.stop.wait(1):
                cur.execute("SELECT count(*), sum(octet_length(body)) FROM outbox.messages")
            conn.close()

    def killer(self):
        conn = psycopg2.connect(self.admin_url)
        conn.autocommit = True
        while not self.stop.wait(1):
            conn.cursor().execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                                  (self.db.dispatcher,))
        conn.close()

    def exhaust_pool(self):
        probe = psycopg2.connect(self.admin_url)
        cur = probe.cursor()
        cur.execute("SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')"
                    "::int - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')")
        free = cur.fetchone()[0]
        probe.close()
        for _ in range(max(0, free - 3)):
            self.conns.append(psycopg2.connect(self.db.writer_url))

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join()
        for conn in self.conns:
            try:
                conn.close()
            except psycopg2.Error:
                pass
        self.threads, self.conns = [], []


def claim_seconds(metrics_url):
    """The daemon's claim histogram so far: (sum, count); zeros while it does not answer."""
    try:
        text = urllib.request.urlopen(metrics_url, timeout=2).read().decode()
    except OSError:
        return 0.0, 0
    values = {}
    for line in text.splitlines():
        if line.startswith("outboxd_claim_duration_seconds_sum") or line.startswith(
                "outboxd_claim_duration_seconds_count"):
            name, value = line.rsplit(" ", 1)
            values[name.split("{")[0].rsplit("_", 1)[1]] = float(value)
    return values.get("sum", 0.0), int(values.get("count", 0))


def dead_tuples(db_url):
    try:
        conn = psycopg2.connect(db_url, connect_timeout=5)
    except psycopg2.Error:
        return -1
    try:
        cur = conn.cursor()
        cur.execute("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'outbox.messages'::regclass")
        return cur.fetchone()[0]
    finally:
        conn.close()


def quantile(values, q):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(phases, windows, written, arrivals, in_doubt):
    """Per phase: written, completion, p50, p99; then lost and duplicates."""
    delivered = {}
    for message_id, arrived, latency in arrivals:
        delivered.setdefault(message_id, []).append((arrived, latency))
    result = {}
    for phase in phases:
        start, end = windows[phase]
        offered = sum(1 for _, at in written if start <= at < end)
        done = sum(1 for entries in delivered.values() for arrived, _ in entries[:1] if start <= arrived < end)
        latencies = [entries[0][1] for message_id, entries in delivered.items() if message_id.startswith(phase + ":")]
        result[phase] = {"offered": offered, "completion": done / offered if offered else float("nan"),
                         "p50": quantile(latencies, 0.5), "p99": quantile(latencies, 0.99)}
    committed = {message_id for message_id, _ in written}
    lost = sorted(committed - set(delivered))
    duplicates = sum(len(entries) - 1 for entries in delivered.values())
    return result, lost, duplicates, len(in_doubt - committed)

