#!/usr/bin/python3
"""Same-run A/B comparison of outboxd builds (run it through bench/compare.sh).

Each side is an outboxd binary. In every pair both sides run the same workloads
against the same PostgreSQL and RabbitMQ, one after the other, the order
alternating from pair to pair (BASE then HEAD, HEAD then BASE, ...), so that
the machine's drift falls on both alike. Every run gets a database of its own,
migrated by that side's binary, with the daemon on a dispatcher-only role and
the writers on a writer-only role, as deployed.

Workloads:
  drain   ROWS pending rows in SESSIONS sessions, committed before the daemon
          starts, drained with retention.mode delete (the default); rows/s
  keep    the same drain with retention.mode keep (rows marked, not deleted)
  steady  WRITERS pgbench clients enqueue RATE rows/s for SECONDS, one row per
          transaction, while the daemon dispatches them; commit->consumer p50/p99
          from a C++ consumer that reads each body's clock_timestamp()
  writers WRITERS pgbench clients calling outbox.enqueue(), one row per
          transaction, against the same clients inserting into a bare table with
          the same columns and primary key (no daemon); transactions/s
  bulk    BULK_ROWS rows in BULK_SESSIONS sessions committed in one transaction
          while the daemon runs caught up, into an outbox whose statistics count
          it empty (analyzed drained, no VACUUM or ANALYZE after the commit, as in
          production); bulk rows/s from the first row dispatched to the last, and
          the commit->consumer p50/p99 of another destination that gets one row
          every 250 ms meanwhile
  pressure RATE rows/s from a steady writer through the phases of bench/pressure.py
          (PHASE_SECONDS each): completion and p50/p99 per phase, dead tuples,
          claim time, rows lost and duplicates; not in the default set

For each run: PostgreSQL CPU per row (utime + stime of every server process,
from /proc, less the backend this script probes through), WAL bytes per row
(pg_current_wal_insert_lsn() delta), outboxd's own CPU per row and its peak
RSS (from wait4()). A drain's window ends with a VACUUM of the outbox, so the
cleanup a row's life leaves behind is counted too; autovacuum is off and
checkpoints are pushed out of the way so that neither lands in one run and not
in the other. The floor, measured in every pair, is what the database must
spend at the least: a bare script reading batches of 1,000 pending rows in id
order through a partial index and deleting them by id, then the same VACUUM.

Prints one table of medians with HEAD/BASE ratios and exits 1 when HEAD's
drain rate is below 0.97x BASE's, or its PostgreSQL CPU or WAL per row in
either drain above 1.05x.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from urllib.parse import urlparse, urlunparse

import psycopg2

import pressure
from bench import FILL_SQL, ENQUEUE_SQL, bucket_bound, free_port, histogram_series

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "support"))
from harness import Broker  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--side", action="append", required=True, metavar="LABEL=BINARY",
                   help="BASE first, then HEAD")
    p.add_argument("--tools", default="build-release", help="build dir with bench/latency_consumer")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--rows", type=int, default=100000)
    p.add_argument("--sessions", type=int, default=10000)
    p.add_argument("--body", type=int, default=500)
    p.add_argument("--rate", type=int, default=1000)
    p.add_argument("--writers", type=int, default=8)
    p.add_argument("--seconds", type=int, default=30)
    p.add_argument("--bulk-rows", type=int, default=200000)
    p.add_argument("--bulk-sessions", type=int, default=1000)
    p.add_argument("--phase-seconds", type=int, default=60)
    p.add_argument("--bulk-seconds", type=int, default=900, help="a bulk still pending then fails its run")
    p.add_argument("--workloads", default="drain,keep,steady,writers")
    p.add_argument("--broker-max-length", type=int, default=0,
                   help="RabbitMQ keeps only the newest N messages of each queue of the run (0: all)")
    return p.parse_args()


def process_cpu(pid):
    """utime + stime + cutime + cstime of one process, in seconds; 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    # Fields 14-17 of proc(5), counted from the state field (3) after the command name.
    return sum(int(x) for x in fields[11:15]) / TICK


class Cluster:
    """The PostgreSQL server: its processes' CPU and its WAL position, probed through one connection."""

    def __init__(self, admin_url, data_dir):
        self.admin_url, self.data_dir = admin_url, data_dir
        with open(os.path.join(data_dir, "postmaster.pid")) as f:
            self.postmaster = int(f.readline())
        self.conn = psycopg2.connect(admin_url)
        self.conn.autocommit = True
        self.own_backend = self.sql("SELECT pg_backend_pid()")[0][0]
        # Nothing between two runs may land in one of them: no autovacuum, no checkpoint.
        for setting, value in (("autovacuum", "off"), ("checkpoint_timeout", "1h"), ("max_wal_size", "50GB")):
            self.sql(f"ALTER SYSTEM SET {setting} = '{value}'")
        self.sql("SELECT pg_reload_conf()")

    def sql(self, query, params=None):
        with self.conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else None

    def reconnect(self):
        """After a restart of the server: its new postmaster, a new probe connection."""
        with open(os.path.join(self.data_dir, "postmaster.pid")) as f:
            self.postmaster = int(f.readline())
        self.conn = psycopg2.connect(self.admin_url)
        self.conn.autocommit = True
        self.own_backend = self.sql("SELECT pg_backend_pid()")[0][0]

    def server_cpu(self, probes):
        """CPU seconds of every server process so far (exited backends count in the postmaster's
        cutime and cstime), less the backends this script only probes through."""
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.postmaster)], capture_output=True,
                                  text=True).stdout.split()
        total = process_cpu(self.postmaster) + sum(process_cpu(int(pid)) for pid in children)
        return total - sum(process_cpu(pid) for pid in (self.own_backend, *probes))

    def wal(self):
        return int(self.sql("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')")[0][0])

    def snapshot(self, probes=()):
        return self.server_cpu(probes), self.wal()

    def since(self, start, rows, probes=()):
        cpu, wal = self.snapshot(probes)
        return {"pg_cpu_us": (cpu - start[0]) / rows * 1e6, "wal_bytes": (wal - start[1]) / rows}


class Database:
    """A database of its own for one run, migrated by one side's binary, with the run's login roles."""

    def __init__(self, cluster, admin_url, broker, binary, tmp):
        self.cluster, self.admin_url, self.broker, self.tmp = cluster, admin_url, broker, tmp
        self.name = "cmp_" + uuid.uuid4().hex[:8]
        self.dispatcher, self.writer = f"{self.name}_dispatcher", f"{self.name}_writer"
        cluster.sql(f'CREATE DATABASE "{self.name}"')
        self.superuser_url = urlunparse(urlparse(admin_url)._replace(path="/" + self.name))
        host = urlparse(self.superuser_url).netloc.rpartition("@")[2]
        self.dispatcher_url = urlunparse(urlparse(self.superuser_url)._replace(netloc=f"{self.dispatcher}@{host}"))
        self.writer_url = urlunparse(urlparse(self.superuser_url)._replace(netloc=f"{self.writer}@{host}"))
        subprocess.run([binary, "migrate", "-c", self.config("migrate.yaml", url=self.superuser_url)], check=True,
                       capture_output=True)
        cluster.sql(f'CREATE ROLE "{self.dispatcher}" LOGIN IN ROLE outbox_dispatcher')
        cluster.sql(f'CREATE ROLE "{self.writer}" LOGIN IN ROLE outbox_writer')
        self.conn = psycopg2.connect(self.superuser_url)
        self.conn.autocommit = True
        self.backend = self.sql("SELECT pg_backend_pid()")[0][0]

    def config(self, name, url=None, retention="delete", http=None):
        b = self.broker
        path = os.path.join(self.tmp, f"{self.name}-{name}")
        auth = f'\n  username: "{b.user}"\n  password: "{b.password}"' if b.user else ""
        text = (f'database:\n  url: "{url or self.dispatcher_url}"\n'
                f'broker:\n  url: "{b.url}"\n  profile: {b.profile}{auth}\n'
                f"retention:\n  mode: {retention}\nlog:\n  level: warn\n"
                + (f'http:\n  listen: "127.0.0.1:{http}"\n' if http else ""))
        with open(path, "w") as f:
            f.write(text)
        return path

    def sql(self, query, params=None):
        with self.conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else None

    def close(self):
        self.conn.close()
        self.cluster.sql(f'DROP DATABASE "{self.name}" WITH (FORCE)')
        self.cluster.sql(f'DROP ROLE "{self.dispatcher}"')
        self.cluster.sql(f'DROP ROLE "{self.writer}"')


class Daemon:
    """outboxd run, with its own CPU time and peak RSS taken from wait4() when it stops."""

    def __init__(self, binary, config, log):
        self.log = log
        self.process = subprocess.Popen([binary, "run", "-c", config], stderr=open(log, "w"))

    def check_running(self):
        if self.process.poll() is not None:
            with open(self.log) as f:
                last = f.read().strip().splitlines()[-1:] or ["(no log)"]
            raise RunFailed(f"outboxd exited {self.process.returncode}: {last[0]}")

    def stop(self):
        """Its CPU seconds and peak RSS in MiB. The peak is read before it exits: wait4()'s
        ru_maxrss would count the forked interpreter the daemon was exec'd from."""
        with open(f"/proc/{self.process.pid}/status") as f:
            peak_kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
        self.process.terminate()
        _, status, usage = os.wait4(self.process.pid, 0)
        self.process.returncode = os.waitstatus_to_exitcode(status)
        if self.process.returncode != 0:
            raise RunFailed(f"outboxd exited {self.process.returncode} when stopped")
        return usage.ru_utime + usage.ru_stime, peak_kib / 1024


class RunFailed(Exception):
    """One side could not do one workload (its daemon exited, say): reported, not averaged."""


class Runner:
    def __init__(self, args):
        self.args = args
        self.admin_url = os.environ["OUTBOXD_TEST_PG_URL"]
        self.cluster = Cluster(self.admin_url, os.environ["OUTBOXD_TEST_PG_DATA"])
        self.broker = Broker("rabbitmq")
        self.tmp = tempfile.mkdtemp(prefix="outboxd-compare-")

    def drop_queue(self, queue):
        subprocess.run([os.environ["OUTBOXD_SERVICES_SH"], "rabbitmqctl", "delete_queue", queue], check=True,
                       capture_output=True, timeout=120)

    def fill(self, db, queue):
        a = self.args
        # Every page the run touches is then newer than the last checkpoint: no full-page images,
        # as for a row dispatched soon after its commit.
        self.cluster.sql("CHECKPOINT")
        db.sql("ALTER TABLE outbox.messages SET (autovacuum_enabled = false)")
        db.sql(FILL_SQL, (queue + ":", queue, a.sessions, a.body, a.rows))
        db.sql("VACUUM ANALYZE outbox.messages")

    def consumer(self, queue, quiet_seconds, arrivals=None):
        """bench/latency_consumer on `queue`, ready; it exits `quiet_seconds` after the last message."""
        args = [os.path.join(self.args.tools, "bench", "latency_consumer"), self.broker.url,
                self.broker.address(queue), str(quiet_seconds), self.broker.user, self.broker.password,
                self.broker.profile] + ([arrivals] if arrivals else [])
        consumer = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        assert consumer.stdout.readline().strip() == "latency_consumer ready"
        return consumer

    @staticmethod
    def until_drained(db, daemon, first, seconds, destination=None):
        """Seconds from row `first` dispatched to no immediate row (of `destination`) pending, by index
        lookups every 20 ms whose backend's CPU is left out; None if not drained within `seconds`."""
        only = "AND destination = %s" if destination else ""
        started, deadline = None, time.monotonic() + seconds
        while time.monotonic() < deadline:
            daemon.check_running()
            now = time.monotonic()
            if started is None and db.sql("SELECT NOT EXISTS (SELECT 1 FROM outbox.messages WHERE id = %s "
                                          "AND status = 'pending')", (first,))[0][0]:
                started = now
            if started is not None and not db.sql("SELECT EXISTS (SELECT 1 FROM outbox.messages WHERE status = "
                                                  f"'pending' AND due_at <= created_at {only})",
                                                  (destination,) if destination else None)[0][0]:
                return now - started
            time.sleep(0.02)
        return None

    def vacuumed_costs(self, db, start, rows):
        """The costs since `start` once the outbox is vacuumed. The VACUUM is the run's, not a probe's:
        it runs in a backend of its own, which is counted (and kept open until counted: an exited
        backend's CPU moves to the postmaster)."""
        cleanup = psycopg2.connect(db.superuser_url)
        try:
            cleanup.autocommit = True
            cleanup.cursor().execute("VACUUM outbox.messages")
            return self.cluster.since(start, rows, [db.backend])
        finally:
            cleanup.close()

    def drain(self, binary, retention):
        """Rows/s from the first row dispatched to the last, and the costs of the whole window."""
        a = self.args
        db = Database(self.cluster, self.admin_url, self.broker, binary, self.tmp)
        queue = "cmp_" + uuid.uuid4().hex[:8]
        try:
            self.fill(db, queue)
            first = db.sql("SELECT min(id) FROM outbox.messages")[0][0]
            start = self.cluster.snapshot([db.backend])
            port = free_port()
            daemon = Daemon(binary, db.config("run.yaml", retention=retention, http=port),
                            os.path.join(self.tmp, f"{db.name}.log"))
            window = self.until_drained(db, daemon, first, max(900, a.rows // 1000))
            if window is None:
                raise RuntimeError(f"drain did not finish in {max(900, a.rows // 1000)} s")
            rate = a.rows / window
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
                claims = histogram_series(reply.read().decode(), "outboxd_claim_duration_seconds")[()]
            cpu, rss = daemon.stop()
            costs = self.vacuumed_costs(db, start, a.rows)
            return {"rate": rate, **costs, "outboxd_cpu_us": cpu / a.rows * 1e6, "rss_mib": rss,
                    "claim_p99_ms": bucket_bound(claims, 0.99)}
        finally:
            db.close()
            self.drop_queue(queue)

    def steady(self, binary):
        a = self.args
        db = Database(self.cluster, self.admin_url, self.broker, binary, self.tmp)
        queue = "cmp_" + uuid.uuid4().hex[:8]
        try:
            consumer = self.consumer(queue, 3)
            db.sql("ALTER TABLE outbox.messages SET (autovacuum_enabled = false)")
            self.cluster.sql("CHECKPOINT")
            daemon = Daemon(binary, db.config("run.yaml"),
                            os.path.join(self.tmp, f"{db.name}.log"))
            time.sleep(1)  # connected, leases taken, idle
            script = os.path.join(self.tmp, f"{db.name}-enqueue.sql")
            with open(script, "w") as f:
                f.write(ENQUEUE_SQL % (queue, a.sessions))
            start = self.cluster.snapshot()
            out = subprocess.run(["pgbench", "-n", "-c", str(a.writers), "-j", "2", "-R", str(a.rate), "-T",
                                  str(a.seconds), "-f", script], check=True, capture_output=True, text=True,
                                 env=dict(os.environ, PGDATABASE=db.name, PGUSER=db.writer)).stdout
            written = int(out.split("actually processed: ")[1].split()[0])
            report = consumer.communicate(timeout=a.seconds + 120)[0].split()
            fields = dict(item.split("=") for item in report[1:])
            if int(fields["received"]) != written:
                raise RuntimeError(f"steady: {written} rows written, {fields['received']} received")
            costs = self.cluster.since(start, written)
            cpu, rss = daemon.stop()
            return {"p50": float(fields["p50"]), "p99": float(fields["p99"]), **costs,
                    "outboxd_cpu_us": cpu / written * 1e6, "rss_mib": rss}
        finally:
            db.close()
            self.drop_queue(queue)

    def bulk(self, binary):
        """A bulk committed while the daemon runs, beside a quiet destination (see the docstring)."""
        a = self.args
        db = Database(self.cluster, self.admin_url, self.broker, binary, self.tmp)
        queue, quiet = "cmp_" + uuid.uuid4().hex[:8], "cmpq_" + uuid.uuid4().hex[:8]
        stop = threading.Event()
        daemon = consumer = trickler = None
        try:
            consumer = self.consumer(quiet, 3)
            db.sql("ALTER TABLE outbox.messages SET (autovacuum_enabled = false)")
            db.sql("VACUUM ANALYZE outbox.messages")  # drained: the statistics count it empty
            self.cluster.sql("CHECKPOINT")
            daemon = Daemon(binary, db.config("run.yaml"), os.path.join(self.tmp, f"{db.name}.log"))
            time.sleep(1)  # connected, leases taken, idle
            writer = psycopg2.connect(db.writer_url)
            writer.autocommit = True
            quiet_rows = []

            def trickle():
                with writer.cursor() as cur:
                    while not stop.wait(0.25):
                        cur.execute(ENQUEUE_SQL % (quiet, 1))
                        quiet_rows.append(1)
            trickler = threading.Thread(target=trickle)
            trickler.start()
            start = self.cluster.snapshot([db.backend])
            db.sql(FILL_SQL, (queue + ":", queue, a.bulk_sessions, a.body, a.bulk_rows))
            first = db.sql("SELECT min(id) FROM outbox.messages WHERE destination = %s", (queue,))[0][0]
            window = self.until_drained(db, daemon, first, a.bulk_seconds, queue)
            if window is None:
                left = db.sql("SELECT count(*) FROM outbox.messages WHERE destination = %s AND status = 'pending'",
                              (queue,))[0][0]
                raise RunFailed(f"bulk: {left:,} of {a.bulk_rows:,} rows still pending after {a.bulk_seconds} s")
            rate = a.bulk_rows / window
            stop.set()
            trickler.join()
            writer.close()
            report = consumer.communicate(timeout=120)[0].split()
            fields = dict(item.split("=") for item in report[1:])
            if int(fields["received"]) != len(quiet_rows):
                raise RuntimeError(f"bulk: {len(quiet_rows)} quiet rows written, {fields['received']} received")
            cpu, rss = daemon.stop()
            costs = self.vacuumed_costs(db, start, a.bulk_rows)
            return {"rate": rate, "p50": float(fields["p50"]), "p99": float(fields["p99"]), **costs,
                    "outboxd_cpu_us": cpu / a.bulk_rows * 1e6, "rss_mib": rss}
        finally:
            stop.set()
            if trickler is not None:
                trickler.join()
            for process in (daemon.process if daemon else None, consumer):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait()
            db.close()
            self.drop_queue(queue)
            self.drop_queue(quiet)

    def pressure(self, binary):
        """A steady writer through the pressure phases (bench/pressure.py)."""
        a = self.args
        db = Database(self.cluster, self.admin_url, self.broker, binary, self.tmp)
        queue = "cmp_" + uuid.uuid4().hex[:8]
        arrivals = os.path.join(self.tmp, f"{db.name}-arrivals")
        writer = pressure.Writer(db.writer_url, queue)
        try:
            consumer = self.consumer(queue, 20, arrivals)
            port = free_port()
            daemon = Daemon(binary, db.config("run.yaml", http=port), os.path.join(self.tmp, f"{db.name}.log"))
            metrics = f"http://127.0.0.1:{port}/metrics"
            time.sleep(1)
            stress = pressure.Stress(self.admin_url, db, os.environ["OUTBOXD_SERVICES_SH"])
            # Vacuum as in production: what the pressures hold back is what the phases measure.
            self.cluster.sql("ALTER SYSTEM SET autovacuum = on")
            self.cluster.sql("SELECT pg_reload_conf()")
            writer.start(a.rate)
            windows, figures = {}, {}
            for phase in pressure.PHASES:
                writer.rate = a.rate * (1.5 if phase == "overload" else 1)
                writer.phase = phase
                claims_before, start = pressure.claim_seconds(metrics), time.time()
                stress.begin(phase)
                time.sleep(a.phase_seconds)
                stress.end()
                windows[phase] = (start, time.time())
                claims_after = pressure.claim_seconds(metrics)
                count = claims_after[1] - claims_before[1]
                figures[f"{phase}_claim_ms"] = (claims_after[0] - claims_before[0]) / count * 1000 if count else 0.0
                figures[f"{phase}_dead"] = pressure.dead_tuples(db.superuser_url)
                print(f"  pressure {phase}: {figures[f'{phase}_dead']} dead tuples", flush=True)
            writer.close()
            consumer.communicate(timeout=600)
            with open(arrivals) as f:
                delivered = [(m, float(at), float(ms)) for m, at, ms in (line.split() for line in f)]
            per_phase, lost, duplicates, in_doubt_lost = pressure.report(pressure.PHASES, windows, writer.written,
                                                                         delivered, writer.in_doubt)
            alive = daemon.process.poll() is None
            daemon.stop()
            base = per_phase["baseline"]["completion"]
            for phase, r in per_phase.items():
                figures[f"{phase}_completion"] = r["completion"] / base if base else float("nan")
                figures[f"{phase}_p50"], figures[f"{phase}_p99"] = r["p50"], r["p99"]
            figures.update(lost=len(lost), duplicates=duplicates, in_doubt_lost=in_doubt_lost,
                           daemon_ran_throughout=1.0 if alive else 0.0)
            return figures
        finally:
            writer.close()
            self.cluster.reconnect()
            self.cluster.sql("ALTER SYSTEM SET autovacuum = off")
            self.cluster.sql("SELECT pg_reload_conf()")
            db.conn = psycopg2.connect(db.superuser_url)
            db.conn.autocommit = True
            db.close()
            self.drop_queue(queue)

    def writers(self, binary):
        """Enqueue throughput of WRITERS pgbench clients, one row per transaction, no daemon
        running: outbox.enqueue() into the outbox against a plain INSERT into a bare table with
        the same columns and primary key, alternating, SECONDS/3 each."""
        a = self.args
        db = Database(self.cluster, self.admin_url, self.broker, binary, self.tmp)
        try:
            db.sql("CREATE TABLE public.bare (LIKE outbox.messages INCLUDING DEFAULTS INCLUDING IDENTITY)")
            # The partition the outbox's trigger derives: a constant here, as a bare table has no trigger.
            db.sql("ALTER TABLE public.bare ADD PRIMARY KEY (id), ALTER COLUMN partition SET DEFAULT 0")
            db.sql(f'GRANT INSERT ON public.bare TO "{db.writer}"')
            body = "convert_to(lpad('x', %d, 'x'), 'UTF8')" % a.body
            scripts = {"enqueue": "SELECT outbox.enqueue(destination => 'writers', message_id => gen_random_uuid()::text, "
                                  f"session_id => 's' || (random() * {a.sessions})::int, body => {body});\n",
                       "bare": "INSERT INTO public.bare (message_id, destination, session_id, body) VALUES "
                               f"(gen_random_uuid()::text, 'writers', 's' || (random() * {a.sessions})::int, {body});\n"}
            tps = {name: [] for name in scripts}
            for _ in range(2):
                for name, text in scripts.items():
                    path = os.path.join(self.tmp, f"{db.name}-{name}.sql")
                    with open(path, "w") as f:
                        f.write(text)
                    out = subprocess.run(["pgbench", "-n", "-c", str(a.writers), "-j", "2", "-T",
                                          str(max(a.seconds // 3, 3)), "-f", path], check=True, capture_output=True,
                                         text=True, env=dict(os.environ, PGDATABASE=db.name, PGUSER=db.writer)).stdout
                    tps[name].append(float(out.split("tps = ")[1].split()[0]))
            enqueue, bare = statistics.median(tps["enqueue"]), statistics.median(tps["bare"])
            return {"enqueue_tps": enqueue, "bare_tps": bare, "of_bare": enqueue / bare}
        finally:
            db.close()

    def floor(self):
        """Read 1,000 pending rows in id order through a partial index, delete them by id; repeat."""
        a = self.args
        db = Database(self.cluster, self.admin_url, self.broker, self.sides_binary, self.tmp)
        try:
            db.sql("CREATE TABLE floor_rows (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                   "message_id text NOT NULL, destination text NOT NULL, session_id text, body bytea NOT NULL, "
                   "status text NOT NULL DEFAULT 'pending') WITH (autovacuum_enabled = false)")
            db.sql("CREATE INDEX floor_rows_pending_idx ON floor_rows (id) WHERE status = 'pending'")
            self.cluster.sql("CHECKPOINT")
            db.sql("INSERT INTO floor_rows (message_id, destination, session_id, body) "
                   "SELECT 'floor:' || i, 'floor', 's' || (i %% %s), convert_to(lpad(i::text, %s, 'x'), 'UTF8') "
                   "FROM generate_series(1, %s) i", (a.sessions, a.body, a.rows))
            db.sql("VACUUM ANALYZE floor_rows")
            start = self.cluster.snapshot()
            while True:
                rows = db.sql("SELECT id, message_id, destination, session_id, body FROM floor_rows "
                              "WHERE status = 'pending' ORDER BY id LIMIT 1000")
                if not rows:
                    break
                db.sql("DELETE FROM floor_rows WHERE id = ANY(%s)", ([r[0] for r in rows],))
            db.sql("VACUUM floor_rows")
            # This connection's backend is the floor's own connection: counted, not left out as a probe.
            return self.cluster.since(start, a.rows)
        finally:
            db.close()

    def run_workload(self, workload, binary):
        if workload == "steady":
            return self.steady(binary)
        if workload == "writers":
            return self.writers(binary)
        if workload == "bulk":
            return self.bulk(binary)
        if workload == "pressure":
            return self.pressure(binary)
        return self.drain(binary, "keep" if workload == "keep" else "delete")

    def run(self):
        a = self.args
        sides = [s.split("=", 1) for s in a.side]
        self.sides_binary = sides[-1][1]
        workloads = a.workloads.split(",")
        results = {label: {w: [] for w in workloads} for label, _ in sides}
        floors, failures = [], {}
        # A drain of millions of rows would otherwise hold them all in the broker; the oldest
        # are dropped as a consumer that keeps up would take them. The node keeps its policies
        # across restarts, so one left by an earlier run is cleared when this run sets none.
        rabbitmqctl = [os.environ["OUTBOXD_SERVICES_SH"], "rabbitmqctl"]
        if a.broker_max_length:
            subprocess.run(rabbitmqctl + ["set_policy", "cmp-max-length", "^cmp_",
                                          f'{{"max-length": {a.broker_max_length}}}', "--apply-to", "queues"],
                           check=True, capture_output=True, timeout=120)
        else:
            subprocess.run(rabbitmqctl + ["clear_policy", "cmp-max-length"], capture_output=True, timeout=120)
        for pair in range(a.pairs):
            order = sides if pair % 2 == 0 else sides[::-1]
            for label, binary in order:
                for w in workloads:
                    try:
                        r = self.run_workload(w, binary)
                    except RunFailed as e:
                        failures.setdefault((label, w), str(e))
                        print(f"pair {pair + 1} {label:>12} {w:6} failed: {e}", flush=True)
                        continue
                    results[label][w].append(r)
                    print(f"pair {pair + 1} {label:>12} {w:6} " + " ".join(f"{k}={v:.2f}" for k, v in r.items()),
                          flush=True)
            if "drain" in workloads:
                floors.append(self.floor())
                print(f"pair {pair + 1} {'floor':>12} drain  " + " ".join(f"{k}={v:.2f}"
                                                                       for k, v in floors[-1].items()), flush=True)
        return self.table(sides, workloads, results, floors, failures)

    def table(self, sides, workloads, results, floors, failures):
        a = self.args
        (base, _), (head, _) = sides[0], sides[-1]

        def median(label, w, key):
            runs = results[label][w]
            return statistics.median(r[key] for r in runs) if runs and key in runs[0] else None

        def cell(value):
            if value is None:
                return "failed"
            return f"{value:.2f}" if abs(value) < 10 else f"{value:,.1f}"

        floor = {k: statistics.median(f[k] for f in floors) for k in floors[0]} if floors else {}
        print(f"\nmedians of {a.pairs} alternating pairs; drain: {a.rows} rows in {a.sessions} sessions, "
              f"{a.body}-byte bodies; steady: {a.rate} rows/s from {a.writers} writers for {a.seconds} s; RabbitMQ")
        print(f"| workload | figure | {base} | {head} | {head}/{base} | floor | {head}/floor |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        figures = {"rate": "rows/s", "p50": "commit->consumer p50 (ms)", "p99": "commit->consumer p99 (ms)",
                   "pg_cpu_us": "PostgreSQL CPU per row (us)", "wal_bytes": "WAL per row (B)",
                   "outboxd_cpu_us": "outboxd CPU per row (us)", "rss_mib": "outboxd peak RSS (MiB)",
                   "claim_p99_ms": "claim p99, bucket bound (ms)",
                 "enqueue_tps": "enqueue() transactions/s", "bare_tps": "bare table INSERTs/s",
                 "of_bare": "enqueue() / bare table"}
        kinds = {"drain": ("rate", "pg_cpu_us", "wal_bytes", "outboxd_cpu_us", "rss_mib", "claim_p99_ms"),
                 "steady": ("p50", "p99", "pg_cpu_us", "wal_bytes", "outboxd_cpu_us", "rss_mib"),
                 "bulk": ("rate", "p50", "p99", "pg_cpu_us", "wal_bytes", "outboxd_cpu_us", "rss_mib"),
                 "pressure": tuple(f"{phase}_{figure}" for phase in pressure.PHASES
                                   for figure in ("completion", "p50", "p99", "dead", "claim_ms"))
                 + ("lost", "duplicates", "in_doubt_lost", "daemon_ran_throughout"),
                 "writers": ("enqueue_tps", "bare_tps", "of_bare")}
        for phase in pressure.PHASES:
            figures.update({f"{phase}_completion": f"{phase}: completion of baseline's",
                            f"{phase}_p50": f"{phase}: commit->consumer p50 (ms)",
                            f"{phase}_p99": f"{phase}: commit->consumer p99 (ms)",
                            f"{phase}_dead": f"{phase}: dead tuples at its end",
                            f"{phase}_claim_ms": f"{phase}: mean claim (ms)"})
        figures.update(lost="rows lost", duplicates="rows delivered twice",
                       in_doubt_lost="rows whose commit failed, not delivered",
                       daemon_ran_throughout="daemon ran throughout (1 yes)")
        failed = [f"{w} failed: {why}" for (label, w), why in failures.items() if label == head]
        for w in workloads:
            for key in kinds.get(w, kinds["drain"]):
                b, h = median(base, w, key), median(head, w, key)
                ratio = f"{h / b:.2f}" if b and h is not None else ""
                at_floor = w == "drain" and key in floor and h is not None
                print(f"| {w} | {figures[key]} | {cell(b)} | {cell(h)} | {ratio} | "
                      + (f"{floor[key]:,.1f} | {h / floor[key]:.2f} |" if at_floor else " | |"))
                if w in ("drain", "keep") and ratio and ((key == "rate" and h / b < 0.97) or
                                                (key in ("pg_cpu_us", "wal_bytes") and h / b > 1.05)):
                    failed.append(f"{w} {figures[key]} {ratio}x {base}'s")
        if "bulk" in workloads and "drain" in workloads:
            of_drain = {label: (median(label, "bulk", "rate") / median(label, "drain", "rate")
                                if median(label, "bulk", "rate") and median(label, "drain", "rate") else None)
                        for label in (base, head)}
            print(f"| bulk | rows/s of drain's | {cell(of_drain[base])} | {cell(of_drain[head])} | | | |")
        for (label, w), why in failures.items():
            print(f"{label} {w}: {why}")
        if failed:
            print("compare: HEAD falls behind BASE: " + "; ".join(failed))
            return 1
        print("compare: HEAD holds its ground against BASE")
        return 0


if __name__ == "__main__":
    sys.exit(Runner(parse_args()).run())
