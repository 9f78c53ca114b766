"""The outboxd image (tests/container/build.sh) run with podman against PostgreSQL and RabbitMQ."""

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))

from harness import Broker, Consumer, enqueue, free_port, unique, wait_until, write_config  # noqa: E402
from harness import database, workdir  # noqa: E402,F401  (fixtures)

IMAGE = os.environ.get("OUTBOXD_IMAGE", "localhost/outboxd:test")
UID = "10001"
SHUTDOWN_TIMEOUT_S = 5


def run_flags():
    """What `podman run` needs on a cgroup v1 host without systemd: tests/container/run.sh says why."""
    limits = subprocess.run([os.path.join(os.path.dirname(__file__), "podman_limits.sh")],
                            capture_output=True, text=True, check=True).stdout.split()
    return ["--runtime", "runc", "--network=host", "--health-interval=disable", *limits]


def podman(*args, check=True, timeout=120):
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result


def outboxd(etc, *args):
    """One outboxd command in a throwaway container, with `etc` mounted as /etc/outboxd."""
    return podman("run", "--rm", *run_flags(), "-v", f"{etc}:/etc/outboxd:ro", IMAGE, *args)


@pytest.fixture
def etc(workdir):
    """The config dir the container mounts; readable by the image's user, as a real one must be."""
    path = os.path.join(workdir, "etc")
    os.mkdir(path, 0o755)
    os.chmod(path, 0o755)
    return path


def write_readable(path, *args, **kwargs):
    write_config(path, *args, **kwargs)
    os.chmod(path, 0o644)
    return path


def test_image_runs_as_uid_10001_and_its_one_shot_commands_work(etc, database):
    assert podman("image", "inspect", "--format", "{{.Config.User}}", IMAGE).stdout.strip() == f"{UID}:{UID}"
    assert podman("run", "--rm", *run_flags(), "--entrypoint", "id", IMAGE, "-u").stdout.strip() == UID
    assert outboxd(etc, "version").stdout.startswith("outboxd ")
    write_readable(f"{etc}/outboxd.yaml", database, Broker("rabbitmq"))
    checked = outboxd(etc, "check-config", "-c", "/etc/outboxd/outboxd.yaml")
    assert "rabbitmq" in checked.stdout, checked.stdout


def main_pid_uid(name):
    status = podman("exec", name, "cat", "/proc/1/status").stdout
    return next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))


def healthcheck(name):
    return podman("healthcheck", "run", name, check=False).returncode == 0


def test_image_publishes_as_a_dispatcher_role_reports_healthy_and_stops_on_sigterm(etc, database):
    broker = Broker("rabbitmq")
    queue = unique("container")
    # The image's migrate as the superuser (the harness migrated already: it checks the
    # schema); the daemon as the harness's login role that holds only outbox_dispatcher.
    superuser = SimpleNamespace(url=database.superuser_url, schema=database.schema)
    write_readable(f"{etc}/migrate.yaml", superuser, broker)
    outboxd(etc, "migrate", "-c", "/etc/outboxd/migrate.yaml")
    port = free_port()
    write_readable(f"{etc}/outboxd.yaml", database, broker, http={"listen": f"0.0.0.0:{port}"},
                   dispatch={"shutdown_timeout_ms": SHUTDOWN_TIMEOUT_S * 1000})

    name = unique("outboxd")
    consumer = Consumer(broker, queue)
    podman("run", "-d", "--name", name, *run_flags(), "-v", f"{etc}:/etc/outboxd:ro", IMAGE)
    try:
        wait_until(lambda: healthcheck(name), timeout=30, what="podman healthcheck run: healthy")
        assert podman("inspect", "--format", "{{.State.Health.Status}}", name).stdout.strip() == "healthy"
        assert main_pid_uid(name) == UID
        writer = database.writer()
        with writer, writer.cursor() as cur:
            enqueue(cur, queue, "from-the-writer", b"hello from a writer")
        writer.close()
        received = consumer.receive(1, timeout=30)
        assert [(m.id, bytes(m.body)) for m in received] == [("from-the-writer", b"hello from a writer")]

        started = time.monotonic()
        podman("stop", "-t", str(SHUTDOWN_TIMEOUT_S + 10), name, timeout=60)
        took = time.monotonic() - started
        state = podman("inspect", "--format", "{{.State.ExitCode}} {{.State.Status}}", name).stdout.split()
        logs = podman("logs", name).stderr
        assert state == ["0", "exited"], logs
        assert took < SHUTDOWN_TIMEOUT_S + 2, f"SIGTERM took {took:.1f} s\n{logs}"
    finally:
        consumer.close()
        podman("rm", "-f", name, check=False)
