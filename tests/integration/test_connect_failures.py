"""A server speaking German: bad credentials and a missing database end `outboxd run` (78), a server down or
shutting down is waited for.

The test starts its own throwaway cluster with lc_messages=de_DE.UTF-8 and password authentication (the shared
one stays as it is): outboxd must tell these apart by the SQLSTATE the server sends, never by English words.
scripts/setup.sh generates the locale.
"""

import os
import signal
import subprocess
import time

import psycopg2
import pytest

from harness import OUTBOXD, NoBroker, Target, free_port, wait_until, write_config
from pg_cluster import Cluster

PASSWORD = "richtig"


@pytest.fixture(scope="module")
def cluster():
    german = Cluster.primary("de", password=PASSWORD, lc_messages="de_DE.UTF-8").start()
    try:
        yield german
    finally:
        german.remove()


def start_daemon(workdir, url):
    config = write_config(os.path.join(workdir, "outboxd.yaml"), Target(url), NoBroker(),
                          database={"reconnect_min_ms": 100, "reconnect_max_ms": 500})
    log = open(os.path.join(workdir, "outboxd.log"), "w+")
    process = subprocess.Popen([OUTBOXD, "run", "-c", config], stdout=log, stderr=log,
                               env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"))
    return process, log


def output(log):
    log.seek(0)
    return log.read()


def exits_with(workdir, url, timeout=20):
    process, log = start_daemon(workdir, url)
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        code = None
    return code, output(log)


def keeps_waiting(workdir, url, seconds=3):
    """The daemon is still retrying after `seconds`; stopped with SIGTERM it exits 0. Returns its log."""
    process, log = start_daemon(workdir, url)
    try:
        time.sleep(seconds)
        assert process.poll() is None, f"exited {process.returncode}:\n{output(log)}"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
    assert code == 0, output(log)
    return output(log)


def test_a_wrong_password_exits_78_with_the_servers_code(workdir, cluster):
    code, log = exits_with(workdir, cluster.url(password="falsch"))
    assert code == 78, log
    assert "[28P01]" in log and "Passwort-Authentifizierung" in log, log
    assert "LOCATION" not in log and "falsch" not in log, log


def test_a_missing_database_exits_78(workdir, cluster):
    code, log = exits_with(workdir, cluster.url(database="gibtesnicht"))
    assert code == 78, log
    assert "[3D000]" in log, log


def test_a_server_that_refuses_connections_is_waited_for(workdir, cluster):
    log = keeps_waiting(workdir, f"postgresql://postgres:{PASSWORD}@127.0.0.1:{free_port()}/postgres")
    assert "database unavailable" in log, log


def test_a_server_shutting_down_is_waited_for(workdir, cluster):
    # A smart shutdown waits for the open connection and meanwhile refuses new ones with 57P03.
    held = psycopg2.connect(cluster.url())
    stopping = cluster.stop("smart", wait=False)
    try:
        def refused():
            try:
                psycopg2.connect(cluster.url()).close()
                return False
            except psycopg2.OperationalError:
                return True
        wait_until(refused, timeout=10, what="the server refusing new sessions")
        log = keeps_waiting(workdir, cluster.url())
        assert "[57P03]" in log, log
    finally:
        held.close()
        stopping.wait(timeout=60)
        cluster.start()
