"""outboxd's byte bounds against real PostgreSQL and RabbitMQ: the largest message and the memory budgets."""

import time

import pytest

from harness import Broker, Consumer, Daemon, enqueue, rabbitmq_has_queue, unique, wait_parked, wait_until, write_config


@pytest.fixture
def broker():
    return Broker("rabbitmq")


def start_daemon(workdir, database, broker, /, **sections):
    return Daemon(write_config(f"{workdir}/outboxd.yaml", database, broker, **sections)).start()


def test_a_row_over_the_largest_message_parks_at_once_with_its_size_and_other_sessions_flow(
        workdir, database, broker):
    queue = unique("oversize")
    consumer = Consumer(broker, queue)
    daemon = start_daemon(workdir, database, broker, dispatch={"max_message_bytes": 65536})
    try:
        with database.writer(autocommit=False) as conn, conn.cursor() as cur:
            enqueue(cur, queue, "big-1", b"x" * 100_000, session_id="big")
            enqueue(cur, queue, "big-2", b"x", session_id="big")
            for i in range(20):
                enqueue(cur, queue, f"good-{i}", b"y" * 1000, session_id=f"good{i % 4}")
        parked = wait_parked(database, "big-1", timeout=10)
        ids = sorted(m.id for m in consumer.receive(20, timeout=20) + consumer.quiet_for(0.5))
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert ids == sorted(f"good-{i}" for i in range(20)), "every good row, and neither big one"
    attempts, last_error = parked[0]
    assert attempts == 1, "parked at once, not retried"
    assert "100002 bytes" in last_error and "limit of 65536 bytes" in last_error, last_error
    assert database.query("SELECT status FROM outbox.messages WHERE message_id = 'big-2'") == [("pending",)]



def test_a_row_whose_destination_the_dba_no_longer_allows_parks_and_creates_no_queue(workdir, database, broker):
    queue = unique("allowed")
    rogue = unique("rogue")
    with database.writer() as conn, conn.cursor() as cur:
        enqueue(cur, rogue, "rogue-1", b"x", session_id="r")
        enqueue(cur, queue, "fine-1", b"y", session_id="f")
    database.query("UPDATE outbox.settings SET allowed_destinations = %s", ([queue],))
    consumer = Consumer(broker, queue)
    daemon = start_daemon(workdir, database, broker)
    try:
        parked = wait_parked(database, "rogue-1", timeout=20)
        assert [m.id for m in consumer.receive(1, timeout=20)] == ["fine-1"]
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert parked == [(1, f'destination "{rogue}" is not in settings.allowed_destinations; not sent')]
    assert not rabbitmq_has_queue(rogue), "no queue was declared for the refused name"

MIB = 1 << 20
BODY = 50_000_000  # bytes per row
ROWS = 12


def status_kib(pid, field):
    """A field of /proc/PID/status in KiB: VmRSS now, VmHWM its peak so far."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def dispatch_large_rows(workdir, database, broker, **dispatch):
    """Runs a daemon over ROWS rows of BODY bytes each; returns (idle RSS, peak RSS) in MiB."""
    queue = unique("large")
    daemon = Daemon(write_config(f"{workdir}/outboxd.yaml", database, broker,
                                 dispatch={"max_message_bytes": 64 * MIB, **dispatch}))
    daemon.asan_options += ":quarantine_size_mb=0"
    daemon.start()
    consumer = Consumer(broker, queue, credit=2)
    try:
        wait_until(lambda: "broker connected" in daemon.log(), timeout=30, what="the daemon connected")
        time.sleep(1)
        idle = status_kib(daemon.process.pid, "VmRSS") / 1024
        # Bodies made by the server: the test process need not hold them.
        with database.writer() as conn, conn.cursor() as cur:
            for i in range(ROWS):
                cur.execute("SELECT outbox.enqueue(destination => %s, message_id => %s, session_id => %s, "
                            "body => convert_to(repeat(%s, %s), 'UTF8'))",
                            (queue, f"large-{i}", f"s{i % 4}", chr(ord("a") + i), BODY))
        received = consumer.receive(ROWS, timeout=240)
        assert sorted(m.id for m in received) == sorted(f"large-{i}" for i in range(ROWS))
        assert all(len(m.body) == BODY for m in received)
        peak = status_kib(daemon.process.pid, "VmHWM") / 1024
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    return idle, peak


def test_large_rows_go_out_within_the_byte_budget(workdir, database, broker):
    """The bound of docs/security.md, "Memory": 2 x in_flight_bytes + claim_bytes + 7 x the largest message over
    the idle daemon. Measured: idle 17 MiB, peak 303 to 333 MiB (Release); with both budgets at 1 GiB the peak
    was 1121 MiB."""
    budget, claim = 64 * MIB, 16 * MIB
    idle, peak = dispatch_large_rows(workdir, database, broker, in_flight_bytes=budget, claim_bytes=claim)
    bound = idle + (2 * budget + claim + 7 * BODY) / MIB
    print(f"idle RSS {idle:.0f} MiB, peak RSS {peak:.0f} MiB with a 64 MiB budget; bound {bound:.0f} MiB")
    assert peak < bound, f"peak RSS {peak:.0f} MiB over {bound:.0f} MiB (idle {idle:.0f} MiB)"

