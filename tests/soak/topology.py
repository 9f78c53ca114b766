"""The soak's servers and processes: a primary with a synchronous standby, the broker node, the daemon and writers.

Every fault the soak injects is a method here: a kill -9 of the daemon (restarted
at once, as systemd would), a broker restart (kill -9 or clean, in turns), a
primary restart (-m immediate), a failover (kill the primary, promote the
standby, rebuild a standby from the new primary on the dead one's port so the
multi-host URL stays right and the next failover has one).
"""

import os
import re
import signal
import subprocess
import threading
import time
import urllib.request

import psycopg2

from harness import Daemon
from pg_cluster import Cluster


# A standby retries a lost primary every 5 s by default; commits wait for it meanwhile (synchronous),
# which the soak would count against the daemon's resume time after a primary restart.
STANDBY_SETTINGS = {"wal_retrieve_retry_interval": "200ms"}


class ServerPair:
    """A primary and a synchronous streaming standby; `hosts` names both, whichever is primary."""

    def __init__(self):
        self.primary = Cluster.primary("soak-primary", synchronous_standby_names="*").start()
        self.standby = None
        self.failovers = 0
        try:
            self.standby = self.primary.standby("soak-standby", **STANDBY_SETTINGS).start()
            self._make_synchronous()
        except BaseException:
            self.remove()
            raise
        self.hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"

    def restart_primary(self):
        """The primary crashes (-m immediate) and comes back on the same data and port."""
        self.primary.kill()
        self.primary.start()

    def fail_over(self):
        """Kills the primary and promotes the standby; returns once the new primary takes writes."""
        self.primary.kill()
        time.sleep(1)  # as long as a cluster manager takes to decide
        self.standby.promote()
        self.failovers += 1

    def rebuild_standby(self):
        """A new standby of the new primary on the dead primary's port, synchronous again."""
        dead, self.primary = self.primary, self.standby
        dead.remove()
        self.standby = self.primary.standby(f"soak-standby{self.failovers}", port=dead.port,
                                            **STANDBY_SETTINGS).start()
        self._make_synchronous()

    def _make_synchronous(self):
        """Commits wait for the standby from here on: a failover then loses nothing a writer saw committed.
        A promoted standby starts without (pg_cluster: it would wait for a standby it lacks)."""
        self.primary.psql("ALTER SYSTEM SET synchronous_standby_names = '*'")
        self.primary.psql("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with psycopg2.connect(self.primary.url()) as conn, conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'")
                if cur.fetchone()[0] > 0:
                    return
            time.sleep(0.1)
        raise AssertionError(f"the standby never became synchronous:\n{self.standby.log()[-3000:]}")

    def remove(self):
        for cluster in (self.standby, self.primary):
            if cluster is not None:
                cluster.remove()


class BrokerNode:
    """The RabbitMQ node of a scripts/services.sh scratch dir of the soak's own: restarting it disturbs no one.

    Restarts alternate between a crash (SIGKILL: deliveries in flight get no outcome, the daemon must
    send them again) and a clean stop (SIGTERM: RabbitMQ settles what it holds, then closes)."""

    def __init__(self, services_sh, scratch):
        self.services_sh = services_sh
        self.pid_file = os.path.join(scratch, "rabbitmq", "rabbitmq.pid")
        self.env = dict(os.environ, OUTBOXD_SCRATCH=scratch)
        self.restarts = 0

    def _run(self, *args):
        subprocess.run([self.services_sh, *args], env=self.env, check=True, timeout=300,
                       stdout=subprocess.DEVNULL)

    def restart(self):
        self.restarts += 1
        if self.restarts % 2 == 1:
            with open(self.pid_file) as f:
                pid = int(f.read())
            os.kill(pid, signal.SIGKILL)
            while os.path.exists(f"/proc/{pid}"):
                time.sleep(0.05)
        self._run("stop-rabbitmq")  # after a crash: epmd, and the node's state in the scratch dir
        self._run("start-rabbitmq")


def dispatched_total(port):
    """outboxd_rows_dispatched_total of the daemon's /metrics; None while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as response:
            text = response.read().decode()
    except OSError:
        return None
    found = re.search(r"^outboxd_rows_dispatched_total(?:\{[^}]*\})? (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


class SupervisedDaemon:
    """The daemon as systemd runs it: killed -9, started again at once. Samples its RSS, life by life."""

    def __init__(self, config_path, metrics_port):
        self.daemon = Daemon(config_path, name="outboxd-soak")
        # A sanitized build: freed memory leaves the process, so RSS means what it does without.
        self.daemon.asan_options += ":quarantine_size_mb=0"
        self.metrics_port = metrics_port
        self.lives = 0
        self.started_at = 0.0
        self.rss = []  # (life, seconds since that life's start, RSS in KiB)
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def start(self):
        self.daemon.start()
        self.lives += 1
        self.started_at = time.monotonic()
        if not self._sampler.is_alive():
            self._sampler.start()
        return self

    def kill_and_restart(self):
        self.daemon.kill()
        self.start()

    def dispatched(self):
        return dispatched_total(self.metrics_port)

    def _sample(self):
        while not self._stop.wait(0.5):
            life, started, process = self.lives, self.started_at, self.daemon.process
            try:
                with open(f"/proc/{process.pid}/status") as f:
                    rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            except (OSError, StopIteration, ValueError):
                continue  # between a kill and the restart
            if life == self.lives:
                self.rss.append((life, time.monotonic() - started, rss))

    def stop(self):
        self._stop.set()
        return self.daemon.stop(timeout=60)


class BatchWriter(threading.Thread):
    """One application (a login role holding only the writer role): commits `batch` rows per transaction,
    round robin over `sessions` sessions of its own, at up to `rate` rows/s, until stopping is set.

    Message ids are "w<writer>s<session>-<n>", n zero-padded, so within a session they sort in commit
    order. committed: ids the server confirmed; in_doubt: ids of batches whose commit ended with the
    connection (they exist or not, all together)."""

    def __init__(self, index, connect, queue, sessions, batch, rate):
        super().__init__(daemon=True)
        self.index = index
        self.connect = connect
        self.queue = queue
        self.sessions = sessions
        self.batch = batch
        self.interval = batch / rate if rate else 0.0
        self.stopping = threading.Event()
        self.committed = []
        self.in_doubt = []
        self.errors = 0

    def run(self):
        conn = None
        n = 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            ids, sessions = [], []
            for _ in range(self.batch):
                session = f"w{self.index}s{n % self.sessions:03d}"
                ids.append(f"{session}-{n:09d}")
                sessions.append(session)
                n += 1
            try:
                if conn is None:
                    conn = self.connect()
                    conn.autocommit = True
                self._insert(conn, ids, sessions)
                self.committed += ids
            except psycopg2.Error:
                self.errors += 1
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.1)
            next_at += self.interval
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic() - 1)  # after an outage, no burst to catch up
        if conn is not None:
            conn.close()

    def _insert(self, conn, ids, sessions):
        # The body is the commit's clock, as bench/latency_consumer reads it.
        sql = ("INSERT INTO outbox.messages (message_id, destination, session_id, body) "
               "SELECT m, %s, s, convert_to(extract(epoch FROM clock_timestamp())::text, 'UTF8') "
               "FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS t(m, s, i) ORDER BY i")
        try:
            with conn.cursor() as cur:
                cur.execute(sql, (self.queue, ids, sessions))
        except psycopg2.OperationalError:
            self.in_doubt += ids
            raise
