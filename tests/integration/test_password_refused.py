"""A refused password: the error names the user, whatever the password was, and never shows the password."""

import os
import shutil
import subprocess
import tempfile

import pytest

from harness import free_port, write_config
from test_secrets import NoBroker, Target, run

USER = "secauditor"


def as_postgres(*args):
    """initdb and pg_ctl refuse to run as root; the shared services run as postgres too."""
    command = ["runuser", "-u", "postgres", "--", *args] if os.getuid() == 0 else list(args)
    subprocess.run(command, check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def password_cluster():
    """A scratch cluster of its own that asks TCP clients for a password (the shared one trusts
    loopback): the port where USER logs in with the password "right-PW"."""
    bindir = sorted(d for d in os.listdir("/usr/lib/postgresql"))[-1]
    bindir = f"/usr/lib/postgresql/{bindir}/bin"
    if not os.access(f"{bindir}/initdb", os.X_OK):
        pytest.skip("no PostgreSQL server binaries")
    scratch = tempfile.mkdtemp(prefix="outboxd-pwtest.")
    if os.getuid() == 0:
        shutil.chown(scratch, "postgres")
    port = free_port()
    as_postgres(f"{bindir}/initdb", "-D", f"{scratch}/data", "-U", "postgres", "--no-sync",
                "--auth-local=trust", "--auth-host=scram-sha-256")
    as_postgres(f"{bindir}/pg_ctl", "-D", f"{scratch}/data", "-l", f"{scratch}/log", "-w",
                "-o", f"-p {port} -k {scratch} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
    try:
        as_postgres("psql", "-X", "-q", "-h", scratch, "-p", str(port), "-d", "postgres",
                    "-c", f"CREATE ROLE {USER} LOGIN PASSWORD 'right-PW'")
        yield port
    finally:
        as_postgres(f"{bindir}/pg_ctl", "-D", f"{scratch}/data", "-m", "immediate", "-w", "stop")
        shutil.rmtree(scratch, ignore_errors=True)


# A password equal to the user name must not hide the user name: that would
# confirm the password to whoever reads the log.
@pytest.mark.parametrize("password", [USER, "WrongPW-7f3a"])
def test_a_refused_password_names_the_user(workdir, password_cluster, password):
    url = f"postgresql://{USER}:{password}@127.0.0.1:{password_cluster}/postgres"
    config = write_config(os.path.join(workdir, "outboxd.yaml"), Target(url), NoBroker())
    status = run(["status", "-c", config])
    printed = status.stdout + status.stderr
    assert f'password authentication failed for user "{USER}"' in printed, printed
    assert f"cannot connect to {USER}@127.0.0.1:{password_cluster}/postgres: " in printed, printed
    if password != USER:
        assert password not in printed, printed


def test_the_right_password_connects(workdir, password_cluster):
    url = f"postgresql://{USER}:right-PW@127.0.0.1:{password_cluster}/postgres"
    config = write_config(os.path.join(workdir, "outboxd.yaml"), Target(url), NoBroker())
    status = run(["status", "-c", config])
    assert "password authentication failed" not in status.stdout + status.stderr
