#!/usr/bin/python3
"""outboxd benchmark driver (run it through bench/run.sh, which starts the services).

Drain mode: N rows over K sessions are committed first, then timed three ways
in each run, so that the daemon's figure stands beside the ceilings measured on
the same machine at the same moment:
  broker ceiling    a raw Proton publisher sending N messages, same window, same body size
                    (and, with fewer sessions than the window, again with a window of
                    one message per session: strict order's own ceiling)
  database ceiling  claim + mark in batches without AMQP (bench/claim_mark)
  outboxd           the daemon draining the backlog
Fixed-rate mode (--rate): one row per transaction at R rows/s through pgbench;
reports commit->consumer latency percentiles beside the broker's own
publish->consumer percentiles, measured at the same rate under the same
writers (bench/raw_publisher in its fixed-rate mode), once as it comes and once
in strict order over the same sessions (a message waits for the previous one of
its session to be accepted).
"""

import argparse
import os
import statistics
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from urllib.parse import urlparse, urlunparse

import psycopg2

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "support"))
from harness import Broker  # noqa: E402

# A backlog: rows (message id prefix, destination, sessions, body bytes, rows), as the superuser.
FILL_SQL = ("INSERT INTO outbox.messages (message_id, destination, session_id, body) "
            "SELECT %s || i, %s, 's' || (i %% %s), convert_to(lpad(i::text, %s, 'x'), 'UTF8') "
            "FROM generate_series(1, %s) i")

# pgbench's transaction for writers (destination, sessions): the body is the writer's clock,
# which bench/latency_consumer reads to time commit -> consumer.
ENQUEUE_SQL = ("SELECT outbox.enqueue(destination => '%s', message_id => gen_random_uuid()::text, "
               "session_id => 's' || (random() * %d)::int, "
               "body => convert_to(extract(epoch from clock_timestamp())::text, 'UTF8'));\n")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def histogram_series(metrics_text, name):
    """The cumulative buckets of histogram `name` as {labels other than le: [(bound, count), ...]}."""
    series = {}
    for line in metrics_text.splitlines():
        if line.startswith(name + "_bucket{"):
            labels, value = line[len(name) + len("_bucket{"):].rsplit("} ", 1)
            fields = dict(item.split("=") for item in labels.split(","))
            le = fields.pop("le").strip('"')
            series.setdefault(tuple(sorted(fields.items())), []).append((float(le), float(value)))
    return series


def bucket_bound(buckets, share):
    """The smallest bucket bound (ms) that holds `share` of the observations."""
    total = buckets[-1][1]
    return next(le for le, count in buckets if count >= share * total) * 1000


def delay_quantiles(metrics_text):
    """p50 and p99 bounds (ms) of outboxd_dispatch_delay_seconds per `until` label, read from its
    buckets: the smallest bucket bound that holds that share of the rows."""
    out = {}
    for labels, buckets in histogram_series(metrics_text, "outboxd_dispatch_delay_seconds").items():
        until = dict(labels)["until"].strip('"')
        for q in (50, 99):
            out[f"{until} p{q}"] = bucket_bound(buckets, q / 100)
    return out


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build-release")
    p.add_argument("--rows", type=int, default=50000)
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument("--window", type=int, default=1000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--body", type=int, default=500)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--broker", default="rabbitmq", choices=["rabbitmq", "artemis"])
    p.add_argument("--instances", default="1", help="comma-separated instance counts, e.g. 1,2,3")
    p.add_argument("--rate", type=int, default=0, help="fixed-rate mode: rows per second")
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--writer-cost", action="store_true", help="measure the wake-up trigger's cost to writers")
    p.add_argument("--dispatch", action="append", default=[], metavar="KEY=VALUE",
                   help="extra dispatch setting for the daemon, e.g. busy_poll_ms=1 (repeatable)")
    p.add_argument("--clients", type=int, default=4, help="fixed-rate mode: pgbench clients")
    return p.parse_args()


class Bench:
    def __init__(self, args):
        self.args = args
        self.bin = os.path.join(args.build, "daemon", "outboxd")
        self.broker = Broker(args.broker)
        self.tmp = tempfile.mkdtemp(prefix="outboxd-bench-")
        self.admin_url = os.environ["OUTBOXD_TEST_PG_URL"]
        self.db_name = "bench_" + uuid.uuid4().hex[:8]
        # As deployed: outboxd and claim_mark log in with a role that holds only
        # outbox_dispatcher, pgbench's writers with one that holds only outbox_writer.
        # The superuser creates the database and the roles, migrates, and fills the backlog.
        self.dispatcher_role, self.writer_role = f"{self.db_name}_dispatcher", f"{self.db_name}_writer"
        self.admin(f'CREATE DATABASE "{self.db_name}"')
        superuser_url = urlunparse(urlparse(self.admin_url)._replace(path="/" + self.db_name))
        host = urlparse(superuser_url).netloc.rpartition("@")[2]
        self.db_url = urlunparse(urlparse(superuser_url)._replace(netloc=f"{self.dispatcher_role}@{host}"))
        migrate = self.write_config("migrate.yaml", url=superuser_url)
        subprocess.run([self.bin, "migrate", "-c", migrate], check=True, capture_output=True)
        self.admin(f'CREATE ROLE "{self.dispatcher_role}" LOGIN IN ROLE outbox_dispatcher',
                   f'CREATE ROLE "{self.writer_role}" LOGIN IN ROLE outbox_writer')
        self.config = self.write_config()
        self.conn = psycopg2.connect(superuser_url)
        self.conn.autocommit = True

    def admin(self, *statements):
        admin = psycopg2.connect(self.admin_url)
        admin.autocommit = True
        for statement in statements:
            admin.cursor().execute(statement)
        admin.close()

    def close(self):
        """Drops the run's login roles, which are cluster-wide."""
        self.conn.close()
        self.admin(f'DROP ROLE IF EXISTS "{self.dispatcher_role}"', f'DROP ROLE IF EXISTS "{self.writer_role}"')

    def writer_env(self):
        """The environment for pgbench: the writer role, in the bench's database."""
        return dict(os.environ, PGDATABASE=self.db_name, PGUSER=self.writer_role)

    def write_config(self, name="outboxd.yaml", http_port=None, url=None):
        """A config for outboxd (the dispatcher role, unless `url` says otherwise)."""
        b = self.broker
        auth = f"\n  username: \"{b.user}\"\n  password: \"{b.password}\"" if b.user else ""
        path = os.path.join(self.tmp, name)
        extra = "".join(f"  {kv.replace('=', ': ', 1)}\n" for kv in self.args.dispatch)
        with open(path, "w") as f:
            f.write(f"""database:
  url: "{url or self.db_url}"
broker:
  url: "{b.url}"
  profile: {b.profile}{auth}
dispatch:
  in_flight: {self.args.window}
  batch_size: {self.args.batch}
  stats_interval_ms: 60000
{extra}log:
  level: warn
""" + (f"http:\n  listen: \"127.0.0.1:{http_port}\"\n" if http_port else ""))
        return path

    def sql(self, query, params=None):
        with self.conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else None

    def fill(self, queue):
        a = self.args
        self.sql(FILL_SQL, (queue + ":", queue, a.sessions, a.body, a.rows))
        self.sql("VACUUM ANALYZE outbox.messages")

    # The drain is watched every 20 ms while it runs, so the probes are index
    # lookups: a count(*) over 20,000 rows took 11 ms of a database core, half
    # a core taken from the broker and outboxd, which the raw publisher's
    # ceiling never paid.
    def first_pending(self):
        return self.sql("SELECT min(id) FROM outbox.messages WHERE status = 'pending' AND due_at <= created_at")[0][0]

    def still_pending(self, row_id):
        return self.sql("SELECT EXISTS (SELECT 1 FROM outbox.messages WHERE id = %s AND status = 'pending')",
                        (row_id,))[0][0]

    # The bench's rows are all immediate: messages_ready_idx holds every one.
    def any_pending(self):
        return self.sql("SELECT EXISTS (SELECT 1 FROM outbox.messages "
                        "WHERE status = 'pending' AND due_at <= created_at)")[0][0]

    def broker_ceiling(self, run, window):
        a, b = self.args, self.broker
        queue = f"bench_raw_{run}_{uuid.uuid4().hex[:6]}"
        cmd = [os.path.join(a.build, "bench", "raw_publisher"), b.url, b.address(queue), str(a.rows), str(window),
               str(a.body)]
        if b.user:
            cmd += [b.user, b.password, b.profile]
        else:
            cmd += ["", "", b.profile]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
        self.drop_queue(queue)
        return float(out.split("rate=")[1].split()[0])

    def drop_queue(self, queue):
        """Deletes a queue nobody consumed, so that later runs meet a broker as empty as the first did."""
        services = os.environ["OUTBOXD_SERVICES_SH"]
        if self.args.broker == "rabbitmq":
            command = [services, "rabbitmqctl", "delete_queue", queue]
        else:
            command = [services, "artemis", "queue", "delete", "--silent", "--name", queue,
                       "--url", os.environ["OUTBOXD_TEST_ARTEMIS_CORE_URL"]]
            if self.broker.user:
                command += ["--user", self.broker.user, "--password", self.broker.password]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def database_ceiling(self):
        self.fill("bench_db")
        cmd = [os.path.join(self.args.build, "bench", "claim_mark"), "-c", self.config]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
        return float(out.split("rate=")[1].split()[0])

    def drain(self, run, instances):
        queue = f"bench_outboxd_{run}_{uuid.uuid4().hex[:6]}"
        self.fill(queue)
        total = self.args.rows
        # The clock starts when the lowest row is dispatched: it is its
        # session's head, published in the first wave.
        first = self.first_pending()
        daemons = [subprocess.Popen([self.bin, "run", "-c", self.config], stderr=open(
            os.path.join(self.tmp, f"outboxd-{run}-{i}.log"), "w")) for i in range(instances)]
        try:
            started = None
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                now = time.monotonic()
                if started is None and not self.still_pending(first):
                    started = now
                if started is not None and not self.any_pending():
                    rate = total / (now - started)
                    break
                time.sleep(0.02)
            else:
                raise RuntimeError("drain did not finish in 600 s")
        finally:
            for d in daemons:
                d.terminate()
            for d in daemons:
                d.wait(timeout=60)
        self.drop_queue(queue)
        return rate

    def start_consumer(self, queue, arrivals=None):
        b = self.broker
        cmd = [os.path.join(self.args.build, "bench", "latency_consumer"), b.url, b.address(queue), "3",
               b.user, b.password, b.profile] + ([arrivals] if arrivals else [])
        consumer = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert consumer.stdout.readline().strip() == "latency_consumer ready"
        return consumer

    def consumer_report(self, consumer):
        report = consumer.communicate(timeout=self.args.seconds + 120)[0].strip()
        return dict(item.split("=") for item in report.split()[1:])

    def writers(self, queue):
        """pgbench enqueueing one row per transaction into `queue` at the fixed rate."""
        a = self.args
        script = os.path.join(self.tmp, f"enqueue-{queue}.sql")
        with open(script, "w") as f:
            f.write(ENQUEUE_SQL % (queue, a.sessions))
        env = self.writer_env()
        return subprocess.Popen(["pgbench", "-n", "-c", str(a.clients), "-j", str(min(a.clients, 2)),
                                 "-R", str(a.rate), "-T", str(a.seconds), "-f", script],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def latency_through_outboxd(self, run):
        """Milliseconds from each row's commit to its arrival at a consumer, sorted."""
        queue = f"bench_latency_{run}_{uuid.uuid4().hex[:6]}"
        arrivals = os.path.join(self.tmp, f"{queue}.arrivals")
        consumer = self.start_consumer(queue, arrivals)
        # Each row's inserting transaction, for its commit timestamp afterwards
        # (the row itself is gone or rewritten by then). The trigger stays for the
        # broker-alone runs too (fixed_rate drops it), so that their writers do the same work.
        self.sql("CREATE TABLE IF NOT EXISTS public.bench_commits (message_id text, xid xid)")
        self.sql("TRUNCATE public.bench_commits")
        # SECURITY DEFINER: it runs in the writers' inserts, and the writer role may not write this table.
        self.sql("CREATE OR REPLACE FUNCTION public.bench_record_xid() RETURNS trigger LANGUAGE plpgsql "
                 "SECURITY DEFINER AS $$ "
                 "BEGIN INSERT INTO public.bench_commits VALUES (NEW.message_id, pg_current_xact_id()::xid); "
                 "RETURN NULL; END $$")
        self.sql("CREATE OR REPLACE TRIGGER bench_record_xid AFTER INSERT ON outbox.messages "
                 "FOR EACH ROW EXECUTE FUNCTION public.bench_record_xid()")
        port = free_port()
        daemon = subprocess.Popen([self.bin, "run", "-c", self.write_config(f"outboxd-rate-{run}.yaml", port)],
                                  stderr=open(os.path.join(self.tmp, f"outboxd-rate-{run}.log"), "w"))
        time.sleep(1)
        out, _ = self.writers(queue).communicate()
        written = int(out.split("actually processed: ")[1].split()[0])
        self.writer_latency.append(float(out.split("latency average = ")[1].split()[0]))
        received = int(self.consumer_report(consumer)["received"])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            self.delays.append(delay_quantiles(reply.read().decode()))
        daemon.terminate()
        daemon.wait(timeout=60)
        if received != written:
            raise RuntimeError(f"outboxd: {written} rows written, {received} received")
        committed = dict(self.sql("SELECT message_id, extract(epoch FROM pg_xact_commit_timestamp(xid))::float8 "
                                  "FROM public.bench_commits"))
        with open(arrivals) as f:
            return sorted((float(t) - committed[m]) * 1000 for m, t in (line.split() for line in f)
                          if committed.get(m) is not None)

    def latency_broker_alone(self, run, session_order=False):
        """The broker's own publish-to-consumer percentiles at the same rate, with the
        same writers committing at the same time (their rows stay pending: no daemon).
        With session_order, each message belongs to one of the sessions and waits for
        the acceptance of the previous one of its session, and its latency counts from
        when it fell due: the least a strict-order dispatcher could get from that broker."""
        a, b = self.args, self.broker
        queue = f"bench_raw_latency_{run}_{uuid.uuid4().hex[:6]}"
        consumer = self.start_consumer(queue)
        writers = self.writers("bench_no_daemon")
        subprocess.run([os.path.join(a.build, "bench", "raw_publisher"), b.url, b.address(queue),
                        str(a.rate * a.seconds), str(a.window), str(a.body), b.user, b.password, b.profile,
                        str(a.rate)] + ([str(a.sessions)] if session_order else []),
                       check=True, capture_output=True, timeout=a.seconds + 120)
        writers.communicate()
        self.sql("DELETE FROM outbox.messages WHERE destination = 'bench_no_daemon'")
        fields = self.consumer_report(consumer)
        return {p: float(fields[p]) for p in ("p50", "p90", "p99", "max")}

    def fixed_rate(self):
        a = self.args
        ours, alone, ordered = [], [], []
        self.delays, self.writer_latency = [], []
        for run in range(a.runs):
            latencies = self.latency_through_outboxd(run)
            ours.append({p: latencies[min(len(latencies) - 1, int(int(p[1:]) / 100 * len(latencies)))]
                         for p in ("p50", "p90", "p99")} | {"max": latencies[-1]})
            alone.append(self.latency_broker_alone(run))
            ordered.append(self.latency_broker_alone(run, session_order=True))
            print(f"run {run + 1}: outboxd commit->consumer p50 {ours[-1]['p50']:.2f} p99 {ours[-1]['p99']:.2f} ms "
                  f"({len(latencies)} rows); broker alone p50 {alone[-1]['p50']:.2f} p99 {alone[-1]['p99']:.2f} ms; "
                  f"in session order p50 {ordered[-1]['p50']:.2f} p99 {ordered[-1]['p99']:.2f} ms", flush=True)
        self.sql("DROP TRIGGER bench_record_xid ON outbox.messages")

        def line(name, runs):
            return f"  {name:44s}" + ", ".join(f"{p} {statistics.median(r[p] for r in runs):6.2f}"
                                               for p in ("p50", "p90", "p99", "max")) + " ms"
        print(f"\nfixed rate {a.rate} rows/s for {a.seconds} s, {a.sessions} sessions, {a.clients} writer "
              f"clients, {a.broker}; medians of {a.runs} runs")
        print(line("outboxd, commit -> consumer", ours))
        print(line("broker alone, publish -> consumer (ceiling)", alone))
        print(line(f"same, strict order over {a.sessions} sessions", ordered))
        # Bucket bounds of the daemon's own histogram: "p99 <= 5 ms" means the bucket that holds it.
        for until, what in (("publish", "row's transaction start -> handed to AMQP"),
                            ("accept", "row's transaction start -> broker accepted")):
            print(f"  {what:44s}p50 <= {statistics.median(d[until + ' p50'] for d in self.delays):g}, "
                  f"p99 <= {statistics.median(d[until + ' p99'] for d in self.delays):g} ms "
                  "(outboxd_dispatch_delay_seconds buckets)")
        print(f"  {'writer transaction (pgbench latency avg)':44s}{statistics.median(self.writer_latency):.2f} ms "
              "(part of the two lines above, not of commit -> consumer)")

    def writer_cost(self):
        """pgbench single-row enqueue throughput, 8 clients, with and without the wake-up check,
        then with a live daemon dispatching the rows as they come."""
        script = os.path.join(self.tmp, "writer.sql")
        with open(script, "w") as f:
            f.write("INSERT INTO outbox.messages (message_id, destination, body) "
                    "VALUES (gen_random_uuid()::text, 'bench_writer', '\\x00');\n")
        env = self.writer_env()

        def tps(config=None):
            daemon = None
            if config:
                daemon = subprocess.Popen([self.bin, "run", "-c", config],
                                          stderr=open(os.path.join(self.tmp, "outboxd-writer.log"), "a"))
                time.sleep(1)  # connected, claimed, idle
            try:
                out = subprocess.run(["pgbench", "-n", "-c", "8", "-j", "2", "-T", "8", "-f", script],
                                     check=True, capture_output=True, text=True, env=env).stdout
            finally:
                if daemon:
                    daemon.terminate()
                    daemon.wait(timeout=60)
            self.sql("TRUNCATE outbox.messages")
            return float(out.split("tps = ")[1].split()[0])

        # The wake-up check is part of the partition trigger (sql/007); regenerate it without.
        partitions = self.sql("SELECT partition_count FROM outbox.settings")[0][0]
        polling = self.write_config("outboxd-polling.yaml")
        with open(polling) as f:
            text = f.read()
        with open(polling, "w") as f:
            f.write(text.replace("dispatch:\n", "dispatch:\n  poll_interval_ms: 10\n", 1))
        self.sql(f"SELECT outbox.write_partition_function({partitions}, wakeup => false)")
        base = tps()
        live_polling = tps(polling)
        self.sql(f"SELECT outbox.write_partition_function({partitions})")
        quiet = tps()
        live = tps(self.config)
        self.sql("INSERT INTO outbox.instances (instance_id, idle, heartbeat_at) "
                 "VALUES ('bench-armed', true, now() - interval '1 day')")  # armed, but not a live lease holder
        armed = tps()
        self.sql("DELETE FROM outbox.instances WHERE instance_id = 'bench-armed'")
        print(f"writer cost, 8 clients, one row per transaction: no wake-up check {base:.0f} tps; "
              f"check, no idle dispatcher {quiet:.0f} tps ({quiet / base:.0%}); "
              f"check, idle dispatcher (NOTIFY every commit) {armed:.0f} tps ({armed / base:.0%})")
        print(f"writer cost with a live daemon dispatching: no wake-up check, daemon polling every 10 ms "
              f"{live_polling:.0f} tps; check and the daemon's wake-up policy {live:.0f} tps "
              f"({live / live_polling:.0%})")

    def run(self):
        a = self.args
        if a.rate:
            return self.fixed_rate()
        if a.writer_cost:
            return self.writer_cost()
        counts = [int(x) for x in a.instances.split(",")]
        # Strict order lets one row per session be in flight, so with fewer
        # sessions than the window the raw publisher is also timed with a
        # window of one message per session: the most any strict-order
        # dispatcher could do against this broker.
        chained = a.sessions if a.sessions < a.window else None
        raw, raw_chained, db, drained = [], [], [], {n: [] for n in counts}
        for run in range(a.runs):
            raw.append(self.broker_ceiling(run, a.window))
            if chained:
                raw_chained.append(self.broker_ceiling(run, chained))
            db.append(self.database_ceiling())
            for n in counts:
                drained[n].append(self.drain(run, n))
            print(f"run {run + 1}: broker {raw[-1]:.0f}/s, "
                  + (f"broker at window {chained} {raw_chained[-1]:.0f}/s, " if chained else "")
                  + f"database {db[-1]:.0f}/s, "
                  + ", ".join(f"outboxd x{n} {drained[n][-1]:.0f}/s" for n in counts), flush=True)
        broker, database = statistics.median(raw), statistics.median(db)
        print(f"\n{a.rows} rows, {a.sessions} sessions, {a.body}-byte bodies, window {a.window}, "
              f"batch {a.batch}, {a.broker}; medians of {a.runs} runs")
        print(f"  broker ceiling (raw Proton publisher)  {broker:10.0f} msgs/s")
        if chained:
            print(f"  same, window {chained:<5d} (one per session) {statistics.median(raw_chained):10.0f} msgs/s")
        print(f"  database ceiling (claim + mark)        {database:10.0f} rows/s")
        for n in counts:
            rate = statistics.median(drained[n])
            print(f"  outboxd, {n} instance{'s' if n > 1 else ' '}                   {rate:10.0f} rows/s"
                  f"   {rate / broker:.0%} of broker ceiling"
                  + (f", {rate / statistics.median(raw_chained):.0%} of window {chained}" if chained else ""))


if __name__ == "__main__":
    bench = Bench(parse_args())
    try:
        bench.run()
    finally:
        bench.close()
