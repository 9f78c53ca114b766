"""outboxd against a peer whose rejection text is hostile: 1 MiB, invalid UTF-8, forged log lines."""

import os

from harness import Daemon, Peer, enqueue, run_cli, wait_parked, wait_until, write_config


def pending(database):
    return database.query("SELECT count(*) FROM outbox.messages WHERE status = 'pending'")[0][0]


def test_hostile_rejection_text_is_stored_and_logged_clean_and_bounded(workdir, database):
    peer = Peer(workdir, "--reject-hostile", "m0:100")
    path = write_config(f"{workdir}/outboxd.yaml", database, peer,
                        dispatch={"max_attempts": 1, "backoff_initial_ms": 50, "backoff_max_ms": 200})
    run_cli("migrate", "-c", path)
    daemon = Daemon(path).start()
    try:
        with database.writer() as conn, conn.cursor() as cur:
            for i in range(10):
                enqueue(cur, "q", f"m{i}", str(i).encode(), session_id=f"s{i % 2}")
        wait_parked(database, "m0")
        wait_until(lambda: pending(database) == 4, timeout=20, what="session s1 dispatched")
        # Claiming goes on after the write of the hostile text: later rows flow too.
        with database.writer() as conn, conn.cursor() as cur:
            for i in range(10, 20):
                enqueue(cur, "q", f"m{i}", str(i).encode(), session_id=f"t{i}")
        wait_until(lambda: pending(database) == 4, timeout=20, what="later rows dispatched")
        assert daemon.alive()
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()

    last_error = database.query("SELECT last_error FROM outbox.messages WHERE message_id = 'm0'")[0][0]
    repaired = "amqp:precondition-failed: bad \ufffd\ufffd\ufffd\ufffd bytes FAKE level=error forged line [2Jxxx"
    assert repaired in last_error
    assert "bytes cut]" in last_error
    assert len(last_error.encode()) <= 1000, len(last_error.encode())
    assert not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in last_error)

    log = daemon.log()
    assert "\x1b" not in log
    assert not any(line.startswith("FAKE") for line in log.splitlines())
    assert os.path.getsize(daemon.log_path) < 64 * 1024, "the 1 MiB description reached the log"


def test_header_key_with_newline_and_escape_is_escaped_in_the_log(workdir, database):
    peer = Peer(workdir)
    path = write_config(f"{workdir}/outboxd.yaml", database, peer, dispatch={"max_attempts": 1})
    run_cli("migrate", "-c", path)
    daemon = Daemon(path).start()
    try:
        # The SQL refuses such a key since 009 (and 005's CHECK let arrays through): this stands for a row
        # written before, which the daemon must still park with a reason that cannot forge a log line.
        with database.connect() as conn, conn.cursor() as cur:  # one transaction, as the superuser
            enqueue(cur, "q", "bad-headers", b"x", headers='{"ok": 1}')
            cur.execute("UPDATE outbox.messages SET headers = %s WHERE message_id = 'bad-headers'",
                        ('{"k\\nFAKE forged line \\u001b[2J": [1]}',))
        with database.writer() as conn, conn.cursor() as cur:
            enqueue(cur, "q", "fine", b"y")
        wait_parked(database, "bad-headers")
        wait_until(lambda: pending(database) == 0, what="the other row dispatched")
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()
    last_error = database.query("SELECT last_error FROM outbox.messages WHERE message_id = 'bad-headers'")[0][0]
    # The mapper's own rule refuses the key, and quotes it JSON-escaped: no control character survives.
    quoted = 'key "k\\nFAKE forged line \\u001b[2J"'
    assert last_error.startswith(f"headers: {quoted}: keys are 1..128 characters"), last_error
    log = daemon.log()
    assert quoted in log
    assert "\x1b" not in log
    assert not any(line.startswith("FAKE") for line in log.splitlines())


def test_hostile_connection_close_text_is_logged_clean_and_bounded(workdir, database):
    peer = Peer(workdir, "--close-after", "3", "--close-times", "1", "--hostile-close")
    path = write_config(f"{workdir}/outboxd.yaml", database, peer, broker={"reconnect_min_ms": 50})
    run_cli("migrate", "-c", path)
    daemon = Daemon(path).start()
    try:
        with database.writer() as conn, conn.cursor() as cur:
            for i in range(10):
                enqueue(cur, "q", f"m{i}", str(i).encode(), session_id=f"s{i % 2}")
        wait_until(lambda: pending(database) == 0, timeout=20, what="all dispatched after the close")
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()
    assert sum(d["outcome"] == "dropped" for d in peer.deliveries()) == 1
    log = daemon.log()
    lost = [line for line in log.splitlines() if "broker connection lost" in line]
    assert len(lost) == 1, log
    assert "amqp:connection:forced: bad \ufffd\ufffd\ufffd\ufffd bytes FAKE level=error forged line [2Jxxx" in lost[0]
    assert "bytes cut]" in lost[0] and len(lost[0].encode()) < 1200
    assert os.path.getsize(daemon.log_path) < 64 * 1024
