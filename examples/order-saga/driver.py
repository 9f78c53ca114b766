#!/usr/bin/python3
"""Runs the order saga end to end on running PostgreSQL and RabbitMQ: database, roles, outboxd, the saga, orders, checks.

Usage: driver.py --language python|node --outboxd PATH [--orders N] [--transfer-orders N] [--outboxd-kills K]
                 [--saga-kills K] [--keep]

Services come from the environment scripts/services.sh writes (OUTBOXD_TEST_PG_URL,
a superuser; OUTBOXD_TEST_RABBITMQ_URL, _USER, _PASSWORD). It creates a database
and two login roles (the saga's, holding only outbox_writer; outboxd's, holding only
outbox_dispatcher), migrates with `outboxd migrate`, starts outboxd, the stock and
payment services and two saga processes, places the orders, kills what it is told
to kill with SIGKILL (and starts it again), waits until every order is final, checks
each one (check.py) and prints the counts. Exit status 0 when every order is right.

It also places a few orders paid by bank transfer, which never comes and whose
deadline is an hour away, and once the other orders are final fires their timeouts
at once with outbox.reschedule(), as the saga's login role (the writer of the timeout rows): they must end cancelled,
their stock released, within --fire-within seconds.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from urllib.parse import urlparse, urlunparse

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check  # noqa: E402  (next to this file)

TRANSFER_TIMEOUT_MS = 3600000  # an hour: without outbox.reschedule() the run would wait for it

COMMANDS = {
    "python": ["/usr/bin/python3", os.path.join(HERE, "python", "order_saga.py")],
    "node": ["node", os.path.join(HERE, "node", "order_saga.js")],
}


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A child process with its output appended to workdir/NAME.log, so restarts keep one log."""

    def __init__(self, name, argv, workdir, env=None):
        self.name, self.argv, self.env = name, argv, env
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.popen = None

    def start(self):
        with open(self.log_path, "a") as log:
            self.popen = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        return self

    def kill(self):
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=30)

    def stop(self):
        if self.popen and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def alive(self):
        return self.popen.poll() is None

    def lines(self, word):
        with open(self.log_path) as f:
            return sum(1 for line in f if line.startswith(word + " "))


class SagaRun:
    def __init__(self, args, workdir):
        self.args, self.workdir = args, workdir
        self.admin_url = os.environ["OUTBOXD_TEST_PG_URL"]
        suffix = uuid.uuid4().hex[:8]
        self.database, self.app_role, self.daemon_role = (f"order_saga_{suffix}", f"order_saga_app_{suffix}",
                                                          f"order_saga_outboxd_{suffix}")
        self.http_port = free_port()
        self.processes = []

    def url(self, user=None):
        parsed = urlparse(self.admin_url)
        netloc = parsed.netloc if user is None else f"{user}@{parsed.hostname}:{parsed.port}"
        return urlunparse(parsed._replace(path=f"/{self.database}", netloc=netloc))

    def admin(self, sql, database=None):
        conn = psycopg2.connect(self.url() if database else self.admin_url)
        conn.autocommit = True  # CREATE DATABASE runs outside a transaction
        with conn.cursor() as cur:
            cur.execute(sql)
        conn.close()

    def config(self, name, database_url):
        broker = os.environ
        path = os.path.join(self.workdir, name)
        with open(path, "w") as f:
            f.write(f"""database:
  url: "{database_url}"
broker:
  url: "{broker['OUTBOXD_TEST_RABBITMQ_URL']}"
  profile: rabbitmq
  username: "{broker.get('OUTBOXD_TEST_RABBITMQ_USER', '')}"
  password: "{broker.get('OUTBOXD_TEST_RABBITMQ_PASSWORD', '')}"
leases:
  instance_id: order-saga-host
http:
  listen: "127.0.0.1:{self.http_port}"
""")
            if self.args.timeline:
                # Dispatched rows stay, so that an order's conversation can be read whole afterwards.
                f.write("retention:\n  mode: keep\n")
        return path

    def set_up(self):
        self.admin(f'CREATE DATABASE "{self.database}"')
        migrate = self.config("migrate.yaml", self.url())
        subprocess.run([self.args.outboxd, "migrate", "-c", migrate], check=True, capture_output=True, timeout=120)
        # Roles are cluster-wide; the writer and dispatcher groups exist once migrated.
        self.admin(f'CREATE ROLE "{self.app_role}" LOGIN IN ROLE outbox_writer')
        self.admin(f'CREATE ROLE "{self.daemon_role}" LOGIN IN ROLE outbox_dispatcher')
        subprocess.run(["psql", "-qX", "-v", "ON_ERROR_STOP=1", "-v", f"app={self.app_role}", "-d", self.url(),
                        "-f", os.path.join(HERE, "shop.sql")], check=True, capture_output=True, timeout=60)
        self.daemon = Process("outboxd", [self.args.outboxd, "run", "-c", self.config("outboxd.yaml",
                                                                                     self.url(self.daemon_role))],
                              self.workdir)
        prefix = f"order-saga-{self.database[-8:]}"
        self.env = dict(os.environ, ORDER_SAGA_DATABASE_URL=self.url(self.app_role),
                        ORDER_SAGA_AMQP_URL=os.environ["OUTBOXD_TEST_RABBITMQ_URL"],
                        ORDER_SAGA_AMQP_USER=os.environ.get("OUTBOXD_TEST_RABBITMQ_USER", ""),
                        ORDER_SAGA_AMQP_PASSWORD=os.environ.get("OUTBOXD_TEST_RABBITMQ_PASSWORD", ""),
                        ORDER_SAGA_PREFIX=prefix, ORDER_SAGA_PAYMENT_TIMEOUT_MS=str(self.args.payment_timeout_ms),
                        ORDER_SAGA_TRANSFER_TIMEOUT_MS=str(TRANSFER_TIMEOUT_MS),
                        ORDER_SAGA_LATE_RATE=str(self.args.late_rate),
                        ORDER_SAGA_ABANDON_RATE=str(self.args.abandon_rate))

    def language_process(self, name, *command):
        return Process(name, COMMANDS[self.args.language] + list(command), self.workdir, self.env)

    def start(self):
        self.daemon.start()
        self.services = [self.language_process(n, n).start() for n in ("stock", "payments")]
        self.sagas = [self.language_process(f"saga-{i}", "saga").start() for i in (1, 2)]
        self.processes = [self.daemon, *self.services, *self.sagas]
        wait(lambda: all(p.lines("ready") for p in self.services + self.sagas), 30, "consumers ready")

    def run(self):
        """Places the orders while the kills happen; returns the kill counts."""
        self.place_transfers()
        placer = self.language_process("place", "place", str(self.args.orders), str(self.args.per_second)).start()
        placing_s = self.args.orders / self.args.per_second
        kills = {"outboxd": 0, "saga": 0}
        # Spread the kills over the busy part of the run: placing, then timeouts and late payments.
        events = [("outboxd", placing_s * (i + 1) / (self.args.outboxd_kills + 1)) for i in range(self.args.outboxd_kills)]
        events += [("saga", placing_s * (i + 1.5) / (self.args.saga_kills + 1)) for i in range(self.args.saga_kills)]
        began = time.monotonic()
        for what, at in sorted(events, key=lambda e: e[1]):
            time.sleep(max(0.0, began + at - time.monotonic()))
            victim = self.daemon if what == "outboxd" else self.sagas[0]
            victim.kill()
            kills[what] += 1
            print(f"  {time.monotonic() - began:5.1f} s: killed {victim.name} (SIGKILL)", flush=True)
            time.sleep(0.7)
            victim.start()
        placer.popen.wait(timeout=300)
        if placer.popen.returncode != 0:
            raise SystemExit(f"placing orders failed: see {placer.log_path}")
        return kills

    def order_ids(self):
        return [f"order-{n}" for n in range(1, self.args.orders + self.args.transfer_orders + 1)]

    def transfer_ids(self):
        return self.order_ids()[self.args.orders:]

    def place_transfers(self):
        """OrderPlaced for the orders after order-N, paid by bank transfer: the saga gives them an hour to pay."""
        conn = psycopg2.connect(self.url(self.app_role))
        with conn, conn.cursor() as cur:
            for order in self.transfer_ids():
                cur.execute("SELECT outbox.enqueue(%s, %s, %s::jsonb, subject => 'OrderPlaced', session_id => %s,"
                            " correlation_id => %s)", (f"{self.env['ORDER_SAGA_PREFIX']}.orders", f"{order}:placed",
                                                        json.dumps({"orderId": order, "amount": 1000,
                                                                    "payment": "transfer"}), order, order))
        conn.close()

    def fire_transfer_timeouts(self):
        """Moves the transfer orders' timeouts to now as the saga's role; true if all end cancelled in time."""
        orders = self.transfer_ids()
        armed = "SELECT count(*) FROM workflow.instances WHERE id = ANY(%s) AND status = 'AwaitingPayment'" \
                " AND timeout_message_id = id || ':payment-timeout:1' AND timeout_due_at > now() + interval '1 minute'"
        wait(lambda: self.query(armed, (orders,)) == len(orders), 30, "the transfer orders' timeouts armed")
        # reschedule() moves only the caller's own rows: the saga (this login role) wrote the timeouts.
        conn = psycopg2.connect(self.url(self.app_role))
        conn.autocommit = True  # each move commits at once, so outboxd sees it
        with conn.cursor() as cur:
            began = time.monotonic()
            for order in orders:
                cur.execute("SELECT outbox.reschedule(%s, now())", (f"{order}:payment-timeout:1",))
                moved = cur.fetchone()[0]
                if moved is not True:
                    raise SystemExit(f"outbox.reschedule({order}:payment-timeout:1) returned {moved}, not true")
        conn.close()
        deadline = began + self.args.fire_within
        while True:
            problems, unfinished, states = self.check(orders)
            if problems or not unfinished or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        elapsed = time.monotonic() - began
        print(f"transfer orders whose timeout outbox.reschedule() fired now: {len(orders)}, final in {elapsed:.1f} s: "
              + ", ".join(f"{k} {v}" for k, v in sorted(states.items())))
        for line in problems[:20] + unfinished[:20]:
            print("  " + line)
        return states == {"cancelled, never paid": len(orders)} and elapsed <= self.args.fire_within

    def query(self, sql, params):
        conn = psycopg2.connect(self.url())
        with conn, conn.cursor() as cur:
            cur.execute(sql, params)
            value = cur.fetchone()[0]
        conn.close()
        return value

    def settle(self, timeout_s, orders=None):
        """Waits until the orders (default: all) are final and stay so; returns check()'s last answer."""
        deadline = time.monotonic() + timeout_s
        while True:
            for p in self.processes:
                if not p.alive():
                    raise SystemExit(f"{p.name} exited: see {p.log_path}")
            problems, unfinished, states = self.check(orders)
            if problems or time.monotonic() > deadline:
                return problems, unfinished, states
            if not unfinished:
                time.sleep(2.0)  # a late duplicate would show now
                return self.check(orders)
            time.sleep(0.5)

    def check(self, orders=None):
        conn = psycopg2.connect(self.url())
        with conn, conn.cursor() as cur:
            result = check.check(cur, orders or self.order_ids(), self.order_ids())
        conn.close()
        return result

    def report(self, kills, problems, unfinished, states):
        conn = psycopg2.connect(self.url())
        with conn, conn.cursor() as cur:
            cur.execute("SELECT consumer, count(*) FROM outbox.received_messages GROUP BY 1 ORDER BY 1")
            inbox = dict(cur.fetchall())
            cur.execute("SELECT count(*) FROM workflow.processed_messages")
            inbox["saga"] = cur.fetchone()[0]
            cur.execute("SELECT status, count(*) FROM outbox.messages GROUP BY 1 ORDER BY 1")
            rows = dict(cur.fetchall())
        conn.close()
        language = [p for p in self.processes if p is not self.daemon]
        duplicates = {p.name: p.lines("duplicate") for p in language}
        conflicts = sum(p.lines("conflict") for p in language)
        print(f"orders: {self.args.orders} ({self.args.language}), payment timeout {self.args.payment_timeout_ms} ms;"
              f" and {self.args.transfer_orders} paid by transfer, timeout {TRANSFER_TIMEOUT_MS} ms")
        print(f"kills (SIGKILL, then restarted): outboxd {kills['outboxd']}, saga process {kills['saga']}")
        print("final states: " + ", ".join(f"{k} {v}" for k, v in sorted(states.items())))
        print(f"messages handled once (inbox ids): {inbox}")
        print(f"duplicates absorbed by the inbox: {sum(duplicates.values())} {duplicates}")
        print(f"transitions retried after a version conflict (40001) or deadlock (40P01): {conflicts}")
        kept = "kept" if self.args.timeline else "deleted"
        print(f"outbox rows left: {rows or 'none'} (dispatched rows are {kept})")
        for line in problems[:20] + unfinished[:20]:
            print("  " + line)
        print(f"wrong: {len(problems)}, unfinished: {len(unfinished)}")
        return not problems and not unfinished

    def show_timeline(self):
        """An order paid by transfer, whose timeout was fired, as `outboxd timeline --correlation` shows it."""
        order = self.transfer_ids()[0]
        shown = subprocess.run([self.args.outboxd, "timeline", "--correlation", order, "-c", self.daemon.argv[-1]],
                               capture_output=True, text=True, timeout=60)
        print(f"\n$ outboxd timeline --correlation {order}\n" + (shown.stdout or shown.stderr).rstrip())
        return shown.returncode == 0

    def show_status(self):
        status = subprocess.run([self.args.outboxd, "status", "-c", self.daemon.argv[-1]], capture_output=True,
                                text=True, timeout=60)
        print("\n$ outboxd status\n" + (status.stdout or status.stderr).rstrip())
        try:
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/metrics", timeout=5).read().decode()
            shown = ("outboxd_rows_dispatched_total", "outboxd_dispatch_delay_seconds_count",
                     "outboxd_dispatch_delay_seconds_sum", "outboxd_rows_parked_total")
            print(f"\n$ curl -s http://127.0.0.1:{self.http_port}/metrics  (a few of them)")
            print("\n".join(line for line in metrics.splitlines() if line.startswith(shown)))
        except OSError as e:
            print(f"metrics: {e}")

    def tear_down(self, keep):
        for p in reversed(self.processes):
            p.stop()
        if keep:
            print(f"\nkept: database {self.database}, roles {self.app_role} and {self.daemon_role}, "
                  f"logs and configs in {self.workdir}")
            return
        self.admin(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        self.admin(f'DROP ROLE IF EXISTS "{self.app_role}", "{self.daemon_role}"')


def wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--language", choices=sorted(COMMANDS), required=True)
    p.add_argument("--outboxd", required=True, help="the outboxd binary")
    p.add_argument("--orders", type=int, default=200)
    p.add_argument("--transfer-orders", type=int, default=5,
                   help="orders after those, paid by a bank transfer that never comes, their timeouts fired at once")
    p.add_argument("--fire-within", type=float, default=5.0,
                   help="seconds the transfer orders may take to end cancelled once their timeouts are due")
    p.add_argument("--per-second", type=float, default=100.0, help="orders placed per second")
    p.add_argument("--payment-timeout-ms", type=int, default=2500)
    p.add_argument("--late-rate", type=float, default=0.10, help="share of payments that come after the timeout")
    p.add_argument("--abandon-rate", type=float, default=0.03, help="share of customers who never pay")
    p.add_argument("--outboxd-kills", type=int, default=0)
    p.add_argument("--saga-kills", type=int, default=0)
    p.add_argument("--settle-timeout", type=float, default=90.0)
    p.add_argument("--workdir", help="logs and configs (default: a new temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the database, roles and logs for a look afterwards")
    p.add_argument("--timeline", action="store_true",
                   help="keep dispatched rows (retention keep) and print the conversation of the first order paid by "
                        "transfer at the end, as outboxd timeline --correlation shows it")
    return p.parse_args(argv)


def main(argv):
    args = parse(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="order-saga-")
    os.makedirs(workdir, exist_ok=True)
    run = SagaRun(args, workdir)
    try:
        run.set_up()
        run.start()
        kills = run.run()
        # Quiet first, so that the time to cancel the transfer orders is not spent behind a backlog.
        run.settle(args.settle_timeout, run.order_ids()[:args.orders])
        fired = run.fire_transfer_timeouts()
        ok = run.report(kills, *run.settle(args.settle_timeout)) and fired
        if args.timeline and args.transfer_orders > 0:
            ok = run.show_timeline() and ok
        if args.keep:
            run.show_status()
    finally:
        run.tear_down(args.keep)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
