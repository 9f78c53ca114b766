"""Throwaway PostgreSQL clusters of a test's own: a primary, its streaming standbys, killed and promoted at will.

The shared cluster of scripts/services.sh serves every other test, so a test
that kills or promotes a server makes its own. Clusters belong to the postgres
OS user (initdb refuses root), live in a directory of their own under the
temporary directory, listen on 127.0.0.1 and a free port, trust local
connections, and are removed by stop().
"""

import glob
import os
import shutil
import subprocess
import tempfile

from harness import free_port


def _bindir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
    return os.path.dirname(found[-1])


def _as_postgres(*args, check=True):
    return subprocess.run(["runuser", "-u", "postgres", "--", *args], cwd="/", capture_output=True, text=True,
                          check=check, timeout=120)


class Cluster:
    """One server. url() names it; settings go to postgresql.auto.conf before the first start.

    Without a password every TCP connection is trusted (replication too); with one, TCP logins of
    every role need their password (scram-sha-256), and the postgres superuser's is `password`.
    The Unix socket in the cluster's directory is trusted either way: psql() uses it.
    """

    def __init__(self, name, password=None, port=None):
        self.name = name
        self.password = password
        self.bin = _bindir()
        self.dir = tempfile.mkdtemp(prefix=f"outboxd-{name}-")
        shutil.chown(self.dir, "postgres", "postgres")
        self.data = os.path.join(self.dir, "data")
        self.port = port or free_port()
        self.log_path = os.path.join(self.dir, "postgresql.log")

    @classmethod
    def primary(cls, name, password=None, **settings):
        cluster = cls(name, password)
        auth = ["-A", "trust"]
        if password is not None:
            pwfile = os.path.join(cluster.dir, "pwfile")
            with open(pwfile, "w") as f:
                f.write(password + "\n")
            shutil.chown(pwfile, "postgres", "postgres")
            auth = ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
        _as_postgres(f"{cluster.bin}/initdb", "-D", cluster.data, "-U", "postgres", "-E", "UTF8", "--locale=C",
                     "--no-sync", *auth)
        if password is None:
            with open(os.path.join(cluster.data, "pg_hba.conf"), "w") as f:
                f.write("local all all trust\nhost all all 127.0.0.1/32 trust\n"
                        "host replication all 127.0.0.1/32 trust\n")
        cluster.configure(wal_level="replica", max_wal_senders=5, fsync="off", **settings)
        return cluster

    def standby(self, name, port=None, **settings):
        """A streaming standby of this (running, password-less) server: pg_basebackup -R, cluster_name = name.
        The backup asks for a fast checkpoint: a just promoted server's spread one takes minutes.

        port: the one to listen on (default: a free one); a rebuilt standby takes the dead
        primary's, so that a multi-host URL naming both stays right across failovers.

        The copy would inherit the primary's synchronous_standby_names: once promoted, it would
        wait for a standby of its own that does not exist, so the standby starts without."""
        standby = Cluster(name, port=port)
        _as_postgres(f"{self.bin}/pg_basebackup", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                     "-D", standby.data, "-R", "-X", "stream", "--no-sync", "--checkpoint=fast")
        standby.configure(cluster_name=name, synchronous_standby_names="", **settings)
        return standby

    def configure(self, **settings):
        settings = dict(listen_addresses="127.0.0.1", port=self.port, unix_socket_directories=self.dir,
                        **settings)
        with open(os.path.join(self.data, "postgresql.auto.conf"), "a") as f:
            for key, value in settings.items():
                f.write(f"{key} = '{value}'\n")

    def start(self):
        result = _as_postgres(f"{self.bin}/pg_ctl", "start", "-D", self.data, "-l", self.log_path, "-w", "-t", "60",
                              check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{self.name} did not start (a locale missing? run scripts/setup.sh):\n{self.log()}")
        return self

    def stop(self, mode="fast", wait=True):
        """pg_ctl stop; without wait, returns the pg_ctl process (a smart stop waits for open connections)."""
        args = ["runuser", "-u", "postgres", "--", f"{self.bin}/pg_ctl", "stop", "-D", self.data, "-m", mode]
        if not wait:
            return subprocess.Popen([*args, "-W"], cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return subprocess.run([*args, "-w"], cwd="/", capture_output=True, timeout=120)

    def kill(self):
        """The server dies at once, as in a crash: -m immediate skips the shutdown checkpoint."""
        self.stop("immediate")

    def promote(self):
        _as_postgres(f"{self.bin}/pg_ctl", "promote", "-D", self.data, "-w", "-t", "60")

    def remove(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def psql(self, sql):
        """Runs `sql` as postgres through the trusted socket."""
        _as_postgres("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", self.dir, "-p", str(self.port),
                     "-d", "postgres", "-c", sql)

    def url(self, database="postgres", password=None):
        """The superuser's URL over TCP, with `password` (default: the cluster's own) when there is one."""
        password = self.password if password is None else password
        credentials = "postgres" if password is None else f"postgres:{password}"
        return f"postgresql://{credentials}@127.0.0.1:{self.port}/{database}"

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except FileNotFoundError:
            return ""
