#!/usr/bin/python3
"""Noisy neighbour: one row of a quiet destination behind another destination's backlog.

Run it through bench/run.sh --noisy-neighbour, which starts the services. Each run,
with outboxd running and caught up, a bulk job commits N rows to destination
`bulk` in K sessions (one transaction, as the writer role); 0.5 s later a
service commits one row to `payments`. Reports the payments row's
commit -> consumer latency, and the bulk's drain rate beside its rate alone
(the same backlog with no neighbour, timed in alternate runs).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid

import psycopg2

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "support"))
from bench import Bench  # noqa: E402
from harness import Consumer  # noqa: E402

BULK_SQL = ("INSERT INTO outbox.messages (message_id, destination, session_id, body) "
            "SELECT %s || i, %s, 's' || (i %% %s), convert_to(lpad(i::text, %s, 'x'), 'UTF8') "
            "FROM generate_series(1, %s) i")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build-release")
    p.add_argument("--rows", type=int, default=200000, help="the bulk backlog")
    p.add_argument("--sessions", type=int, default=1000)
    p.add_argument("--body", type=int, default=500)
    p.add_argument("--window", type=int, default=1000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--delay", type=float, default=0.5, help="seconds between the bulk commit and the payments row")
    p.add_argument("--broker", default="rabbitmq", choices=["rabbitmq", "artemis"])
    p.add_argument("--dispatch", action="append", default=[], metavar="KEY=VALUE")
    return p.parse_args()


class NoisyNeighbour(Bench):
    def writer(self):
        host = self.db_url.rpartition("@")[2]
        conn = psycopg2.connect(f"postgresql://{self.writer_role}@{host}")
        conn.autocommit = True
        return conn

    def bulk_pending(self, queue):
        return self.sql("SELECT EXISTS (SELECT 1 FROM outbox.messages "
                        "WHERE status = 'pending' AND destination = %s)", (queue,))[0][0]

    def run_once(self, run, neighbour):
        """(bulk rows/s from its commit to its last row dispatched, payments latency in ms or None)."""
        a = self.args
        bulk = f"bench_bulk_{run}_{uuid.uuid4().hex[:6]}"
        payments = f"bench_payments_{run}_{uuid.uuid4().hex[:6]}"
        consumer = Consumer(self.broker, payments) if neighbour else None
        daemon = subprocess.Popen([self.bin, "run", "-c", self.config],
                                  stderr=open(os.path.join(self.tmp, f"outboxd-{run}-{neighbour}.log"), "w"))
        latency = None
        try:
            time.sleep(1.5)  # connected, leases taken, caught up
            with self.writer() as conn, conn.cursor() as cur:
                cur.execute(BULK_SQL, (bulk + ":", bulk, a.sessions, a.body, a.rows))
                committed = time.monotonic()
                if neighbour:
                    time.sleep(a.delay)
                    cur.execute("SELECT outbox.enqueue(destination => %s, message_id => %s, body => '\\x01'::bytea)",
                                (payments, f"pay-{run}"))
                    paid = time.time()
            conn.close()
            if neighbour:
                [message] = consumer.receive(1, timeout=600)
                assert message.id == f"pay-{run}", message.id
                latency = (consumer.received[-1][0] - paid) * 1000
            deadline = time.monotonic() + 900
            while self.bulk_pending(bulk):
                if time.monotonic() > deadline:
                    raise RuntimeError("the bulk did not drain in 900 s")
                time.sleep(0.02)
            rate = a.rows / (time.monotonic() - committed)
        finally:
            if consumer:
                consumer.close()
            daemon.terminate()
            daemon.wait(timeout=60)
        self.drop_queue(bulk)
        if neighbour:
            self.drop_queue(payments)
        self.sql("VACUUM outbox.messages")
        return rate, latency

    def run(self):
        a = self.args
        alone, beside, latencies = [], [], []
        for run in range(a.runs):
            alone.append(self.run_once(run, neighbour=False)[0])
            rate, latency = self.run_once(run, neighbour=True)
            beside.append(rate)
            latencies.append(latency)
            print(f"run {run + 1}: bulk alone {alone[-1]:,.0f} rows/s; with the neighbour {rate:,.0f} rows/s; "
                  f"payments row commit -> consumer {latency:.1f} ms", flush=True)
        print(f"\nnoisy neighbour: {a.rows:,} bulk rows in {a.sessions:,} sessions, {a.body}-byte bodies, "
              f"payments row {a.delay} s later, {a.broker}; medians of {a.runs} runs")
        print(f"  payments row, commit -> consumer   {statistics.median(latencies):10.1f} ms "
              f"(max {max(latencies):.1f})")
        print(f"  bulk drain, alone                  {statistics.median(alone):10,.0f} rows/s")
        print(f"  bulk drain, with the neighbour     {statistics.median(beside):10,.0f} rows/s "
              f"({statistics.median(beside) / statistics.median(alone):.2f} x alone)")


def main():
    bench = NoisyNeighbour(parse_args())
    try:
        bench.run()
    finally:
        bench.close()


if __name__ == "__main__":
    main()
