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
    """One server. url(database) is its superuser URL; settings go to postgresql.conf before the first start."""

    def __init__(self, name, data=None):
        self.name = name
        self.bin = _bindir()
        self.dir = tempfile.mkdtemp(prefix=f"outboxd-{name}-")
        shutil.chown(self.dir, "postgres", "postgres")
        self.data = data or os.path.join(self.dir, "data")
        self.port = free_port()
        self.log_path = os.path.join(self.dir, "postgresql.log")

    @classmethod
    def primary(cls, name, **settings):
        cluster = cls(name)
        _as_postgres(f"{cluster.bin}/initdb", "-D", cluster.data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                     "--locale=C", "--no-sync")
        with open(os.path.join(cluster.data, "pg_hba.conf"), "w") as f:
            f.write("local all all trust\nhost all all 127.0.0.1/32 trust\n"
                    "host replication all 127.0.0.1/32 trust\n")
        cluster.configure(wal_level="replica", max_wal_senders=5, fsync="off", **settings)
        return cluster

    def standby(self, name, **settings):
        """A streaming standby of this (running) server: pg_basebackup -R, cluster_name = name.

        The copy would inherit the primary's synchronous_standby_names: once promoted, it would
        wait for a standby of its own that does not exist, so the standby starts without."""
        standby = Cluster(name)
        _as_postgres(f"{self.bin}/pg_basebackup", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                     "-D", standby.data, "-R", "-X", "stream", "--no-sync")
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
            raise RuntimeError(f"{self.name} did not start:\n{self.log()}")
        return self

    def kill(self):
        """The server dies at once, as in a crash: -m immediate skips the shutdown checkpoint."""
        _as_postgres(f"{self.bin}/pg_ctl", "stop", "-D", self.data, "-m", "immediate", "-w", check=False)

    def promote(self):
        _as_postgres(f"{self.bin}/pg_ctl", "promote", "-D", self.data, "-w", "-t", "60")

    def stop(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database="postgres"):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except FileNotFoundError:
            return ""
