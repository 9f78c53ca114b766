"""Start-up warnings for exposed settings: database TLS to a remote host, password files others can read."""

import os

from harness import Daemon, run_cli, wait_until


def write(workdir, url, mode):
    secret = os.path.join(workdir, "db-password")
    with open(secret, "w") as f:
        f.write("pw\n")
    os.chmod(secret, mode)
    path = os.path.join(workdir, "outboxd.yaml")
    with open(path, "w") as f:
        f.write(f"database:\n  url: \"{url}\"\n  password_file: db-password\n"
                "broker:\n  url: amqp://127.0.0.1:1\n")
    return path, secret


def test_check_config_warns_about_prefer_to_a_remote_host_and_an_open_password_file(workdir, monkeypatch):
    monkeypatch.delenv("PGSSLMODE", raising=False)
    path, secret = write(workdir, "postgresql://outboxd@db.example.com:5432/app", 0o644)
    result = run_cli("check-config", "-c", path)
    assert result.stdout.startswith("ok: ")
    assert ("warning: database.url: sslmode is prefer for db.example.com, not loopback: the connection may be "
            "unencrypted") in result.stderr
    assert f'warning: database.password_file: "{secret}" is accessible to group or others (mode 0644)' \
        in result.stderr


def test_check_config_is_quiet_for_verify_full_and_a_private_file(workdir, monkeypatch):
    monkeypatch.delenv("PGSSLMODE", raising=False)
    path, _ = write(workdir, "postgresql://outboxd@db.example.com:5432/app?sslmode=verify-full"
                             "&sslrootcert=/etc/ssl/certs/ca-certificates.crt", 0o600)
    result = run_cli("check-config", "-c", path)
    assert result.stderr == ""


def test_run_logs_the_warnings_at_start(workdir, monkeypatch):
    monkeypatch.setenv("PGSSLMODE", "require")
    path, _ = write(workdir, "host=db.invalid dbname=app connect_timeout=1", 0o640)
    daemon = Daemon(path).start()
    try:
        wait_until(lambda: "database unavailable" in daemon.log(), what="a first connection attempt")
    finally:
        daemon.stop()
    log = daemon.log()
    assert "warning database.url: sslmode is require for db.invalid, not loopback" in log, log
    assert "database.password_file" in log and "(mode 0640)" in log
