"""A database password never shows: check-config, migrate, status and run, with nasty URLs and failing connections."""

import os
import signal
import subprocess
from urllib.parse import quote, urlparse, urlunparse

import pytest

from harness import OUTBOXD, Database, NoBroker, Target, write_config

# (name, url, secrets that must not show). Nothing listens on 127.0.0.1:1;
# nonexistent.invalid never resolves (RFC 6761).
OFFLINE = [
    ("unescaped slash, refused", "postgresql://outboxd:s3cr/etPW@127.0.0.1:5432/app", ["s3cr/etPW", "s3cr", "etPW"]),
    ("slash with a numeric start", "postgresql://outboxd:12/SlashPW@127.0.0.1/app", ["SlashPW"]),
    ("unescaped at sign, refused", "postgresql://outboxd:Ats@ignPW@127.0.0.1/app", ["Ats@ignPW", "ignPW"]),
    ("unescaped question mark", "postgresql://outboxd:s3cr?QmarkPW@127.0.0.1:1/app", ["s3cr?QmarkPW", "QmarkPW"]),
    ("unescaped hash", "postgresql://outboxd:s3cr#HashPW@127.0.0.1:1/app", ["s3cr#HashPW", "HashPW"]),
    ("unescaped colons", "postgresql://outboxd:Col:on:PW@127.0.0.1:1/app", ["Col:on:PW", "on:PW"]),
    ("percent-encoded key", "postgresql://127.0.0.1:1/app?user=outboxd&pass%77ord=EncKeyPW", ["EncKeyPW"]),
    ("percent-encoded value", "postgresql://outboxd:Pct%2F%40PW@127.0.0.1:1/app", ["Pct/@PW", "Pct%2F%40PW"]),
    ("sslpassword", "postgresql://outboxd@127.0.0.1:1/app?sslpassword=SslKeyPW&password=PlainPW",
     ["SslKeyPW", "PlainPW"]),
    ("conninfo with a quoted password", "host=127.0.0.1 port=1 dbname=app password='Quo ted\\'PW'",
     ["Quo ted'PW", "ted'PW"]),
    ("malformed conninfo", "host=127.0.0.1 BrokenPW dbname=app", ["BrokenPW"]),
    ("malformed percent-encoding", "postgresql://outboxd:Bad%zzPW@127.0.0.1:1/app", ["Bad%zzPW", "zzPW"]),
    ("DNS failure", "postgresql://outboxd:DnsFailPW@nonexistent.invalid/app", ["DnsFailPW"]),
]


def run(args, timeout=60):
    return subprocess.run([OUTBOXD, *args], capture_output=True, text=True, timeout=timeout)


def run_daemon(config, seconds=2.5):
    """`outboxd run` for a few seconds (it retries an unreachable database), then SIGTERM."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0")
    process = subprocess.Popen([OUTBOXD, "run", "-c", config], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    try:
        out, err = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    return out + err


def everything_printed(workdir, url):
    config = write_config(os.path.join(workdir, "outboxd.yaml"), Target(url), NoBroker(),
                          log={"level": "debug"})
    printed = {}
    for command in (["check-config"], ["migrate"], ["status"]):
        result = run([*command, "-c", config])
        printed[command[0]] = result.stdout + result.stderr
    printed["run"] = run_daemon(config)
    return printed


def assert_withheld(printed, secrets):
    for command, text in printed.items():
        for secret in secrets:
            assert secret not in text, f"{command} printed {secret!r}:\n{text}"


@pytest.mark.parametrize("name,url,secrets", OFFLINE, ids=[case[0] for case in OFFLINE])
def test_no_command_prints_the_password_of_an_unusable_url(workdir, name, url, secrets):
    printed = everything_printed(workdir, url)
    assert_withheld(printed, secrets)
    assert all(text.strip() for text in printed.values()), printed  # each command said something


# Redaction by structure: a password equal to, or inside, another part of the
# target leaves that part whole (hiding it would confirm the password).
@pytest.mark.parametrize("password", ["d", "127", "outboxd", "app", "p%40ss", "nonexistent.invalid"])
def test_check_config_and_status_keep_user_host_and_database_whole(workdir, password):
    for host, libpq_says in (("127.0.0.1:1", 'server at "127.0.0.1", port 1 failed'),
                             ("nonexistent.invalid", 'could not translate host name "nonexistent.invalid"')):
        config = write_config(os.path.join(workdir, "outboxd.yaml"),
                              Target(f"postgresql://outboxd:{password}@{host}/app"), NoBroker())
        shown = f"outboxd@{host}{'' if ':' in host else ':5432'}/app"
        assert f"ok: database {shown}," in run(["check-config", "-c", config]).stdout
        status = run(["status", "-c", config]).stderr
        assert f"cannot connect to {shown}: " in status and libpq_says in status, status


def test_a_password_with_unescaped_slash_is_refused_at_its_line_and_column(workdir):
    printed = everything_printed(workdir, "postgresql://outboxd:s3cr/etPW@127.0.0.1:5432/app")
    assert "outboxd.yaml:2:" in printed["check-config"]
    assert "database.url: the port is not a number (a '/' in a password must be written %2F)" in \
        printed["check-config"]


def test_a_reachable_database_with_nasty_passwords_in_its_url(workdir):
    # The test server trusts loopback connections, so a password is sent (or
    # not asked for) without failing: migrate, status and run work and print
    # the database they use, never the password.
    database = Database(workdir)
    try:
        parsed = urlparse(database.url)
        for password in ("Nasty?#:@/PW1", "Nasty&=%PW2"):
            netloc = f"{parsed.username}:{quote(password, safe='')}@{parsed.hostname}:{parsed.port}"
            url = urlunparse(parsed._replace(netloc=netloc))
            printed = everything_printed(workdir, url)
            assert_withheld(printed, [password, quote(password, safe="")])
            assert f"ok: database {parsed.username}@{parsed.hostname}:{parsed.port}/{database.name}" in \
                printed["check-config"]
            assert "schema outbox" in printed["migrate"]  # migrated, or up to date the second time
    finally:
        database.drop()

