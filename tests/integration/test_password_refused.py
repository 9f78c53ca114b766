"""A refused password: the error names the user, whatever the password was, and never shows the password."""

import os

import pytest

from harness import NoBroker, Target, write_config
from pg_cluster import Cluster
from test_secrets import run

USER = "secauditor"


@pytest.fixture(scope="module")
def password_cluster():
    """A cluster of its own that asks TCP clients for a password (the shared one trusts loopback):
    the port where USER logs in with the password "right-PW"."""
    cluster = Cluster.primary("pwtest", password="postgres-PW").start()
    try:
        cluster.psql(f"CREATE ROLE {USER} LOGIN PASSWORD 'right-PW'")
        yield cluster.port
    finally:
        cluster.remove()


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
