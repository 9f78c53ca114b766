"""The soak: N rows from several writers through kill -9s, broker and PostgreSQL restarts and failovers.

tests/soak/run.sh runs it in full; tests/fault/test_soak.py runs it with small
counts so that it cannot rot. Faults are spread over the writers' progress:
kills over the first `kill_span` of the rows (the daemon then lives on through
the rest, which gives a long life whose RSS says whether memory stays flat
across broker and database outages), the other faults over the whole run.
The consumer reads the queue once the backlog is zero (the broker is restarted
meanwhile, so the queue holds it all; a lazy-queue policy keeps it on disk).
"""

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))

from harness import Broker, Database, free_port, rabbitmqctl, unique, wait_until, write_config  # noqa: E402
from steady_writer import session_order_violations  # noqa: E402
from topology import BatchWriter, BrokerNode, ServerPair, SupervisedDaemon  # noqa: E402


@dataclasses.dataclass
class Options:
    rows: int = 1_000_000
    kills: int = 100
    broker_restarts: int = 10
    pg_restarts: int = 10
    failovers: int = 3
    writers: int = 4
    sessions: int = 50           # per writer
    batch: int = 50              # rows per writer transaction
    rate: int = 1500             # rows/s for all writers together; 0: as fast as they go
    kill_span: float = 0.5       # kills happen while the first half of the rows is written
    # dispatch.in_flight and batch_size (defaults 1000 and 1000): smaller, so that the bound on
    # duplicates, in_flight + 2 × batch_size per fault, is tight enough to mean something.
    in_flight: int = 200
    batch_size: int = 100
    resume_timeout: float = 60.0
    rss_warmup: float = 30.0     # seconds of the long life left out of the RSS figures
    rss_growth: float = 1.5      # the long life's max RSS over its first sample after warm-up
    consumer: str = ""           # bench/latency_consumer
    services_sh: str = ""        # scripts/services.sh of the broker node's scratch dir
    scratch: str = ""


def schedule(o):
    """(fraction of the rows, fault) in order: kills over kill_span, the rest evenly over the run."""
    events = [((i + 1) / (o.kills + 1) * o.kill_span, "kill") for i in range(o.kills)]
    for kind, count in (("broker", o.broker_restarts), ("pg", o.pg_restarts), ("failover", o.failovers)):
        # Offsets keep two kinds from landing on the same fraction.
        offset = {"broker": 0.0, "pg": 0.33, "failover": 0.66}[kind]
        events += [((i + 1 + offset / 2) / (count + 1), kind) for i in range(count)]
    return sorted(events)


class Soak:
    def __init__(self, o, workdir):
        self.o = o
        self.workdir = workdir
        self.broker = Broker("rabbitmq")
        self.node = BrokerNode(o.services_sh, o.scratch)
        self.servers = ServerPair()
        self.resumes = {"kill": [], "broker": [], "pg": [], "failover": []}
        self.failures = []
        self.writers = []
        self.daemon = None
        self.database = None

    def run(self):
        o = self.o
        url_options = "target_session_attrs=read-write&connect_timeout=2"
        self.database = Database(self.workdir, admin_url=f"postgresql://postgres@{self.servers.hosts}/postgres?"
                                 f"{url_options}")
        self.queue = unique("soak")
        # Kept on disk: the queue holds every message until the end.
        rabbitmqctl("set_policy", "soak-lazy", "^soak_", '{"queue-mode":"lazy"}', "--apply-to", "queues")
        metrics_port = free_port()
        path = write_config(f"{self.workdir}/outboxd.yaml", self.database, self.broker,
                            database={"url": self.database.url, "reconnect_min_ms": 100, "reconnect_max_ms": 1000,
                                      "connect_timeout_ms": 2000},
                            broker={"reconnect_max_ms": 1000},
                            dispatch={"in_flight": o.in_flight, "batch_size": o.batch_size},
                            leases={"instance_id": "soak-host"}, retention={"mode": "keep"},
                            http={"listen": f"127.0.0.1:{metrics_port}"})
        self.daemon = SupervisedDaemon(path, metrics_port).start()
        for w in range(o.writers):
            role = self.database.add_writer(f"w{w}")
            self.writers.append(BatchWriter(w, lambda role=role: self.database.writer(role=role), self.queue,
                                            o.sessions, o.batch, o.rate / o.writers if o.rate else 0))
        started = time.monotonic()
        for writer in self.writers:
            writer.start()
        for fraction, kind in schedule(o):
            wait_until(lambda: self.progress() >= fraction * o.rows or not self.writing(), timeout=24 * 3600,
                       interval=0.2, what=f"{fraction:.0%} of the rows written")
            at, rows = time.strftime("%H:%M:%S"), self.progress()
            self.inject(kind)
            print(f"{time.monotonic() - started:7.1f}s {kind:8s} from {at} at {rows:,} rows", flush=True)
        wait_until(lambda: self.progress() >= o.rows, timeout=24 * 3600, interval=0.5, what="every row written")
        for writer in self.writers:
            writer.stopping.set()
            writer.join(timeout=60)
        wait_until(lambda: self.backlog() == 0, timeout=1800, interval=1,
                   what=f"the backlog drained\n{self.daemon.daemon.log()[-3000:]}")
        duration = time.monotonic() - started
        exit_code = self.daemon.stop()
        if exit_code != 0:
            self.failures.append(f"the daemon exited {exit_code} on SIGTERM")
        return self.verify(duration)

    def progress(self):
        return sum(len(w.committed) for w in self.writers)

    def writing(self):
        return any(w.is_alive() for w in self.writers)

    def backlog(self):
        return self.database.query("SELECT count(*) FROM outbox.messages WHERE status <> 'dispatched'")[0][0]

    def inject(self, kind):
        """One fault; then the time from its end until the daemon marks a row again."""
        before = None
        if kind == "kill":
            self.daemon.kill_and_restart()
        else:
            {"broker": self.node.restart, "pg": self.servers.restart_primary,
             "failover": self.servers.fail_over}[kind]()
            before = self.daemon.dispatched()
        ended = time.monotonic()
        deadline = ended + self.o.resume_timeout
        while time.monotonic() < deadline:
            now = self.daemon.dispatched()
            if now is not None and now > (before or 0):
                self.resumes[kind].append(time.monotonic() - ended)
                break
            time.sleep(0.02)
        else:
            self.failures.append(f"no row marked within {self.o.resume_timeout:.0f} s after a {kind}")
        if kind == "failover":
            self.servers.rebuild_standby()

    def verify(self, duration):
        o = self.o
        rows = {m for (m,) in self.database.query("SELECT message_id FROM outbox.messages")}
        committed = set()
        for writer in self.writers:
            committed.update(writer.committed)
            committed.update(m for m in writer.in_doubt if m in rows)
        deliveries = self.consume(len(rows))
        delivered = set(deliveries)
        lost = committed - delivered
        phantoms = delivered - rows
        violations = session_order_violations(deliveries, {m: m.rpartition("-")[0] for m in delivered})
        duplicates = len(deliveries) - len(delivered)
        faults = o.kills + o.broker_restarts + o.pg_restarts + self.servers.failovers
        bound = faults * (o.in_flight + 2 * o.batch_size)
        backlog = self.backlog()
        rss_first, rss_median, rss_max = self.long_life_rss()
        resumes = sorted(t for times in self.resumes.values() for t in times)
        checks = [(not lost, f"{len(lost)} committed rows never delivered, e.g. {sorted(lost)[:5]}"),
                  (not phantoms, f"{len(phantoms)} delivered rows the database lacks, e.g. {sorted(phantoms)[:5]}"),
                  (not violations, f"{len(violations)} per-session order violations: "
                                   f"{self.explain_order(deliveries, violations[:5])}"),
                  (duplicates <= bound, f"{duplicates} duplicates > {bound}"),
                  (backlog == 0, f"backlog {backlog}"),
                  (rss_max <= rss_first * o.rss_growth, f"RSS grew from {rss_first} to {rss_max} KiB")]
        self.failures += [why for ok, why in checks if not ok]

        def mib(kib):
            return f"{kib / 1024:.1f}"

        def p50_max(times):
            return f"{statistics.median(times):.2f} / {max(times):.2f}" if times else "-"

        in_doubt = sum(1 for w in self.writers for m in w.in_doubt if m in rows)
        table = [("rows committed", f"{len(committed):,} ({in_doubt:,} of them in doubt at commit, then found)"),
                 ("writers × sessions", f"{o.writers} × {o.sessions}"),
                 ("duration", f"{duration:.0f} s"),
                 ("kill -9 of the daemon", str(o.kills)),
                 ("broker restarts (SIGKILL / SIGTERM)", f"{o.broker_restarts} ({(o.broker_restarts + 1) // 2}"
                                                         f" / {o.broker_restarts // 2})"),
                 ("PostgreSQL restarts (-m immediate)", str(o.pg_restarts)),
                 ("failovers", str(self.servers.failovers)),
                 ("lost", str(len(lost))),
                 ("phantoms", str(len(phantoms))),
                 ("order violations", str(len(violations))),
                 ("duplicates (bound)", f"{duplicates:,} ({bound:,} = {faults} faults × "
                                        f"({o.in_flight} + 2 × {o.batch_size}))"),
                 ("backlog at the end", str(backlog)),
                 ("RSS MiB first / median / max", f"{mib(rss_first)} / {mib(rss_median)} / {mib(rss_max)} "
                                                  f"(last life, {self.long_life_span():.0f} s, after "
                                                  f"{o.rss_warmup:.0f} s warm-up)"),
                 ("resume s p50 / max, all", p50_max(resumes))]
        table += [(f"resume s p50 / max, {kind}", p50_max(times)) for kind, times in self.resumes.items()]
        print("\n| | |\n| --- | --- |")
        for name, value in table:
            print(f"| {name} | {value} |")
        for failure in self.failures:
            print(f"FAILED: {failure}")
        return 1 if self.failures else 0

    def explain_order(self, deliveries, late):
        """For each late first delivery: where it came, which later row of its session came first, and
        whether its commit was in doubt."""
        first = {}
        for position, message_id in enumerate(deliveries):
            first.setdefault(message_id, position)
        in_doubt = {m for w in self.writers for m in w.in_doubt}
        lines = []
        for message_id in late:
            session = message_id.rpartition("-")[0]
            ahead = [m for m, p in first.items() if m.startswith(session + "-") and m > message_id
                     and p < first[message_id]]
            lines.append(f"{message_id} first delivered at {first[message_id]:,}, after {len(ahead)} later rows of "
                         f"its session (first {min(ahead)} at {first[min(ahead)]:,})"
                         f"{', in doubt at commit' if message_id in in_doubt else ''}")
        return "; ".join(lines)

    def long_life_rss(self):
        last = self.daemon.lives
        samples = [rss for life, age, rss in self.daemon.rss if life == last and age >= self.o.rss_warmup]
        if not samples:
            self.failures.append("no RSS sample of the last life after the warm-up: the run was too short")
            return 0, 0, 0
        return samples[0], statistics.median(samples), max(samples)

    def long_life_span(self):
        last = self.daemon.lives
        return max((age for life, age, _ in self.daemon.rss if life == last), default=0.0)

    def consume(self, expected):
        """Every message of the queue, in arrival order (bench/latency_consumer, accepting each)."""
        arrivals = os.path.join(self.workdir, "arrivals")
        args = [self.o.consumer, self.broker.url, self.broker.address(self.queue), "5", self.broker.user,
                self.broker.password, "rabbitmq", arrivals]
        result = subprocess.run(args, capture_output=True, text=True, timeout=3600)
        if result.returncode != 0:
            self.failures.append(f"the consumer failed: {result.stderr[-2000:]}")
        with open(arrivals) as f:
            deliveries = [line.split(" ", 1)[0] for line in f]
        print(f"consumed {len(deliveries):,} messages for {expected:,} rows", flush=True)
        return deliveries

    def close(self):
        for writer in self.writers:
            writer.stopping.set()
        if self.daemon is not None and self.daemon.daemon.alive():
            self.daemon.stop()
        if self.database is not None:
            try:
                self.database.drop()
            except Exception as e:  # the servers may be what failed; the clusters go anyway
                print(f"could not drop the database: {e}")
        self.servers.remove()


def soak(o):
    """Runs the soak; its directory (daemon log, config, the consumer's arrivals) is kept when it fails."""
    workdir = tempfile.mkdtemp(prefix="outboxd-soak-")
    run = Soak(o, workdir)
    status = 1
    try:
        status = run.run()
        return status
    finally:
        run.close()
        if status == 0:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept for a look: {workdir}")


def main():
    defaults = Options()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(Options):
        p.add_argument("--" + field.name.replace("_", "-"), type=field.type,
                       default=getattr(defaults, field.name))
    return soak(Options(**vars(p.parse_args())))


if __name__ == "__main__":
    sys.exit(main())
