"""outboxd run against real brokers: mapping, order, scheduling, cancellation, wake-up."""

import datetime
import json
import threading
import time
import urllib.request

import pytest

from harness import Broker, Consumer, Daemon, enqueue, free_port, run_cli, unique, wait_parked, wait_until, write_config

BROKERS = ["rabbitmq", "artemis"]


@pytest.fixture(params=BROKERS)
def broker(request):
    return Broker(request.param)


def assert_session_order(received):
    """Each message body is its row's number within its session: 0, 1, 2, ... per group-id."""
    last = {}
    for message in received:
        seq = int(message.body)
        assert seq == last.get(message.group_id, -1) + 1, f"{message.group_id}: {seq} after {last.get(message.group_id)}"
        last[message.group_id] = seq


def start_daemon(workdir, database, broker, /, **sections):
    return Daemon(write_config(f"{workdir}/outboxd.yaml", database, broker, **sections)).start()


def test_every_column_is_mapped(workdir, database, broker):
    queue = unique("mapping")
    consumer = Consumer(broker, queue)
    daemon = start_daemon(workdir, database, broker)
    body = bytes(range(256)) + b"\x00tail"
    try:
        with database.writer(autocommit=False) as conn, conn.cursor() as cur:
            enqueue(cur, queue, "order-42:reserve-inventory:1", body,
                    session_id="order-42", correlation_id="corr-7", parent_message_id="parent-1",
                    originating_message_id="origin-1", subject="ReserveInventory",
                    content_type="application/octet-stream",
                    headers=json.dumps({"tenant": "acme", "priority": 5, "ratio": 0.5, "urgent": True, "note": None}),
                    ttl="90 seconds", traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            cur.execute("SELECT now()")  # created_at defaults to it; the writer may not read the row
            created_at = cur.fetchone()[0]
        [message] = consumer.receive(1, timeout=20)
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert message.id == "order-42:reserve-inventory:1"
    assert message.group_id == "order-42"
    assert message.correlation_id == "corr-7"
    assert message.subject == "ReserveInventory"
    assert message.content_type == "application/octet-stream"
    assert message.durable is True
    assert abs(message.ttl - 90.0) < 0.001
    assert abs(message.creation_time - created_at.timestamp()) < 0.002
    assert isinstance(message.body, bytes), "body must travel as a data section"
    assert message.body == body
    props = message.properties
    assert props["tenant"] == "acme"
    assert props["priority"] == 5
    assert props["ratio"] == 0.5
    assert props["urgent"] is True
    assert "note" in props and props["note"] is None
    assert props["parent_message_id"] == "parent-1"
    assert props["originating_message_id"] == "origin-1"
    assert props["traceparent"] == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    rows = database.query("SELECT status, dispatched_at IS NOT NULL FROM outbox.messages")
    assert rows in ([], [("dispatched", True)])  # deleted (default retention) or kept


def test_thousands_of_rows_keep_per_session_order(workdir, database, broker):
    queue = unique("order")
    sessions, per_session = 50, 60
    consumer = Consumer(broker, queue, credit=1000)
    daemon = start_daemon(workdir, database, broker)
    try:
        with database.writer() as conn, conn.cursor() as cur:
            for i in range(per_session):
                for s in range(sessions):
                    enqueue(cur, queue, f"s{s}:{i}", f"{i}".encode(), session_id=f"s{s}")
        received = consumer.receive(sessions * per_session, timeout=120)
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert len(received) == sessions * per_session
    assert_session_order(received)


def test_scheduled_row_arrives_on_time_and_cancelled_never(workdir, database, broker):
    queue = unique("scheduled")
    consumer = Consumer(broker, queue)
    daemon = start_daemon(workdir, database, broker)
    try:
        time.sleep(0.5)  # let the daemon go idle: the scheduled row must wake it
        with database.writer() as conn, conn.cursor() as cur:
            cur.execute("SELECT now() + interval '2 seconds'")
            due = cur.fetchone()[0]
            enqueue(cur, queue, "timeout-1", b"due", due_at=due)
            enqueue(cur, queue, "timeout-cancelled", b"never", due_at=due)
            cur.execute("SELECT outbox.cancel('timeout-cancelled')")
            assert cur.fetchone()[0] is True
        [message] = consumer.receive(1, timeout=10)
        arrived = consumer.received[-1][0]
        late = consumer.quiet_for(1.5)
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert message.id == "timeout-1"
    lateness = arrived - due.timestamp()
    assert lateness >= -0.002, f"arrived {-lateness:.3f}s before due_at"
    assert lateness < 0.1, f"arrived {lateness:.3f}s after due_at"
    assert late == []
    status = database.query("SELECT status FROM outbox.messages WHERE message_id = 'timeout-cancelled'")
    assert status == [("cancelled",)]


def test_no_scheduled_row_goes_out_before_its_due_at_while_the_daemon_is_busy(workdir, database, broker):
    """An immediate row every 20 ms keeps the daemon claiming: every one of those claims must leave
    the scheduled rows alone until their due_at (an idle daemon would sleep until then instead)."""
    queue, busy_queue = unique("due-busy"), unique("busy")
    consumer = Consumer(broker, queue)
    daemon = start_daemon(workdir, database, broker)
    stop = threading.Event()
    written = [0]

    def keep_busy():
        # Each row commits by itself: `with conn` would hold them all in one transaction.
        conn = database.writer()
        with conn.cursor() as cur:
            while not stop.wait(0.02):
                enqueue(cur, busy_queue, f"busy-{written[0]}", b"x")
                written[0] += 1
        conn.close()

    writer = threading.Thread(target=keep_busy, daemon=True)
    writer.start()
    try:
        with database.writer() as conn, conn.cursor() as cur:
            cur.execute("SELECT now()")
            now = cur.fetchone()[0]
            due = {f"due-{k}": now + datetime.timedelta(milliseconds=1200 + 100 * k) for k in range(8)}
            for message_id, due_at in due.items():
                enqueue(cur, queue, message_id, b"x", due_at=due_at)
        received = consumer.receive(len(due), timeout=15)
        arrivals = {m.id: t for t, m in consumer.received}
    finally:
        stop.set()
        writer.join()
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    left = database.query("SELECT count(*) FROM outbox.messages WHERE destination = %s AND status = 'pending'",
                          (busy_queue,))[0][0]
    assert written[0] > 50 and left < 10, f"the busy rows did not flow: {left} of {written[0]} left"
    assert sorted(m.id for m in received) == sorted(due)
    early = {i: round(due[i].timestamp() - t, 3) for i, t in arrivals.items() if t < due[i].timestamp() - 0.002}
    assert not early, f"seconds before due_at: {early}"


def small_batches(workdir, database, broker, **dispatch):
    """A config whose claims take 10 rows and whose poll never comes during a test."""
    return write_config(f"{workdir}/outboxd.yaml", database, broker,
                        dispatch={"batch_size": 10, "poll_interval_ms": 60000, **dispatch})


def receive_from_new_daemon(config, consumer, count, timeout=10):
    """Starts outboxd, waits up to `timeout` s for `count` messages, stops it; returns what arrived."""
    daemon = Daemon(config).start()
    try:
        return consumer.receive(count, timeout=timeout)
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()


def test_overdue_timeouts_beyond_one_batch_keep_session_order_and_do_not_wait_for_the_poll(workdir, database, broker):
    """Many more overdue scheduled rows than one claim takes, due in the reverse of their id order,
    with later immediate rows of the same sessions: each session still sees id order, and the rows
    beyond the first batch go out at once, not at the next poll."""
    queue = unique("overdue")
    sessions, timeouts, followers = 5, 8, 4
    consumer = Consumer(broker, queue, credit=1000)
    config = small_batches(workdir, database, broker)
    with database.writer() as conn, conn.cursor() as cur:
        cur.execute("SELECT now()")
        now = cur.fetchone()[0]
        for k in range(timeouts):
            for s in range(sessions):
                # Due in the reverse of id order, all within 300 ms from now.
                due = now + datetime.timedelta(milliseconds=300 - 10 * k)
                enqueue(cur, queue, f"s{s}:{k}", f"{k}".encode(), session_id=f"s{s}", due_at=due)
    time.sleep(0.5)  # every timeout is overdue now
    with database.writer() as conn, conn.cursor() as cur:
        for k in range(timeouts, timeouts + followers):
            for s in range(sessions):
                enqueue(cur, queue, f"s{s}:{k}", f"{k}".encode(), session_id=f"s{s}")
    received = receive_from_new_daemon(config, consumer, sessions * (timeouts + followers))
    assert len(received) == sessions * (timeouts + followers), "rows beyond the first batch waited for the poll"
    assert_session_order(received)


def test_overdue_timeouts_many_batches_long_go_out_without_waiting_for_the_poll(workdir, database, broker):
    queue = unique("overdue-burst")
    rows = 45  # four and a half claims
    consumer = Consumer(broker, queue, credit=1000)
    config = small_batches(workdir, database, broker)
    with database.writer() as conn, conn.cursor() as cur:
        cur.execute("SELECT now() + interval '200 milliseconds'")
        due = cur.fetchone()[0]
        for i in range(rows):
            enqueue(cur, queue, f"timeout-{i}", b"x", session_id=f"wf-{i}", due_at=due)
    time.sleep(0.4)
    received = receive_from_new_daemon(config, consumer, rows)
    assert len(received) == rows, "timeouts beyond the first claims waited for the poll"


def test_a_row_behind_a_timeout_goes_out_when_the_timeout_is_marked_not_after_the_backlog(
        workdir, database, broker):
    """An immediate row whose session has an earlier timeout that is due: the claim passes over it
    until the timeout is marked, and then it goes out at once, not when the pass over a backlog of
    a thousand rows behind it has come to an end."""
    queue = unique("held")
    backlog, sessions = 1000, 100
    consumer = Consumer(broker, queue, credit=2000)
    config = small_batches(workdir, database, broker, in_flight=10)
    with database.writer() as conn, conn.cursor() as cur:
        cur.execute("SELECT now() + interval '100 milliseconds'")
        enqueue(cur, queue, "timeout", b"0", session_id="held", due_at=cur.fetchone()[0])
        enqueue(cur, queue, "after-timeout", b"1", session_id="held")
        for i in range(backlog):
            enqueue(cur, queue, f"backlog-{i}", f"{i // sessions}".encode(), session_id=f"b{i % sessions}")
    time.sleep(0.3)  # the timeout is due: "after-timeout" is behind it
    received = receive_from_new_daemon(config, consumer, backlog + 2, timeout=30)
    assert len(received) == backlog + 2
    assert_session_order(received)
    timeout, held = [i for i, m in enumerate(received) if m.group_id == "held"]
    assert held - timeout < 100, f"the row behind the timeout arrived {held - timeout} messages after its timeout"


def test_retention_keep_purges_dispatched_rows_after_keep_for_and_never_a_row_not_dispatched(workdir, database):
    rabbitmq = Broker("rabbitmq")
    queue = unique("retention")
    consumer = Consumer(rabbitmq, queue)
    daemon = start_daemon(workdir, database, rabbitmq,
                          retention={"mode": "keep", "keep_for_s": 2, "purge_interval_ms": 100})

    def statuses():
        return dict(database.query("SELECT message_id, status FROM outbox.messages"))

    try:
        with database.connect() as conn, conn.cursor() as cur:  # the superuser: a writer may not set status
            # Old rows not dispatched: purging looks at when a row finished, never at its age.
            cur.execute("INSERT INTO outbox.messages (message_id, destination, session_id, created_at, due_at, status, "
                        "attempts) VALUES ('old-parked', %s, 'p', now() - interval '1 day', now() - interval '1 day', "
                        "'parked', 3), ('old-scheduled', %s, 'q', now() - interval '1 day', now() + interval '1 hour', "
                        "'pending', 0)", (queue, queue))
            for i in range(5):
                enqueue(cur, queue, f"sent-{i}", b"x")
        assert len(consumer.receive(5, timeout=20)) == 5
        wait_until(lambda: list(statuses().values()).count("dispatched") == 5, what="5 rows marked, none purged yet")
        time.sleep(1.0)  # purges ran every 100 ms meanwhile
        kept = statuses()
        wait_until(lambda: "sent-0" not in statuses(), timeout=10, what="dispatched rows purged after keep_for")
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert sorted(kept.values()).count("dispatched") == 5, f"purged before keep_for passed: {kept}"
    assert statuses() == {"old-parked": "parked", "old-scheduled": "pending"}


def scrape(port):
    """The daemon's /metrics as {'name{labels}': value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def ready(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as reply:
            return reply.status == 200
    except OSError:  # refused while starting, or 503 (HTTPError) until connected
        return False


def test_metrics_count_outcomes_and_time_each_row_from_when_it_fell_due(workdir, database, broker):
    queue = unique("metrics")
    port = free_port()
    consumer = Consumer(broker, queue)
    daemon = start_daemon(workdir, database, broker, http={"listen": f"127.0.0.1:{port}"})
    try:
        wait_until(lambda: ready(port), what="/readyz 200")
        with database.writer() as conn, conn.cursor() as cur:
            for i in range(20):
                enqueue(cur, queue, f"now-{i}", b"x", session_id=f"s{i % 4}")
            cur.execute("SELECT now() + interval '3 seconds'")
            enqueue(cur, queue, "timeout", b"x", due_at=cur.fetchone()[0])
        assert len(consumer.receive(21, timeout=20)) == 21
        metrics = wait_until(lambda: (m := scrape(port))["outboxd_rows_dispatched_total"] == 21 and m,
                             what="21 rows marked")
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert metrics['outboxd_outcomes_total{outcome="accepted"}'] == 21
    assert metrics['outboxd_outcomes_total{outcome="rejected"}'] == 0
    assert metrics["outboxd_deliveries_sent_total"] == 21
    for until in ("publish", "accept"):
        assert metrics[f'outboxd_dispatch_delay_seconds_count{{until="{until}"}}'] == 21, until
        assert metrics[f'outboxd_dispatch_delay_seconds_sum{{until="{until}"}}'] > 0, until
        # Every row within 2.5 s (the first one attaches the link), the timeout
        # too: its delay counts from its due_at, not from its insert 3 s earlier.
        assert metrics[f'outboxd_dispatch_delay_seconds_bucket{{until="{until}",le="2.5"}}'] == 21, until
    assert (metrics['outboxd_dispatch_delay_seconds_sum{until="publish"}']
            <= metrics['outboxd_dispatch_delay_seconds_sum{until="accept"}'])


def healthcheck(config):
    result = run_cli("healthcheck", "-c", config, check=False)
    return result.returncode, result.stdout + result.stderr


def test_a_broker_never_reached_is_named_in_the_log_at_warn(workdir, database):
    # Before any connection the daemon has no outage to report as "lost": the first
    # refused attempt must still reach an operator reading the log at the default level.
    closed = free_port()
    daemon = start_daemon(workdir, database, Broker("rabbitmq"), broker={"url": f"amqp://127.0.0.1:{closed}"})
    try:
        wait_until(lambda: "warning broker unavailable (" in daemon.log(), timeout=20, what="the warning")
        time.sleep(1.5)  # several more attempts, with the same reason
    finally:
        assert daemon.stop() == 0, daemon.log()
    lines = [line for line in daemon.log().splitlines() if "broker unavailable" in line]
    assert len(lines) == 1 and f"127.0.0.1:{closed}" in lines[0], daemon.log()


def test_healthcheck_command_asks_the_running_daemons_healthz(workdir, database):
    rabbitmq = Broker("rabbitmq")
    port = free_port()
    config = write_config(f"{workdir}/outboxd.yaml", database, rabbitmq, http={"listen": f"0.0.0.0:{port}"})
    assert healthcheck(config)[0] == 1, "healthy before the daemon started"
    daemon = Daemon(config).start()
    try:
        wait_until(lambda: healthcheck(config)[0] == 0, what="outboxd healthcheck exits 0")
        assert healthcheck(config)[1] == "ok\n"
    finally:
        assert daemon.stop() == 0, daemon.log()
    code, output = healthcheck(config)
    assert code == 1 and f"GET http://127.0.0.1:{port}/healthz: " in output, output
    no_http = write_config(f"{workdir}/no-http.yaml", database, rabbitmq)
    assert healthcheck(no_http) == (1, f"healthcheck: http.listen is empty in {no_http}, so the daemon serves no /healthz\n")


def test_idle_daemon_wakes_on_notify_not_on_poll(workdir, database, broker):
    queue = unique("wakeup")
    consumer = Consumer(broker, queue)
    daemon = start_daemon(workdir, database, broker, dispatch={"poll_interval_ms": 60000})
    try:
        consumer.quiet_for(1.0)  # idle, armed
        latencies = []
        for i in range(5):
            with database.writer() as conn, conn.cursor() as cur:
                enqueue(cur, queue, f"wake-{i}", b"x")
            committed = time.time()
            [message] = consumer.receive(1, timeout=5)
            latencies.append(consumer.received[-1][0] - committed)
            time.sleep(0.3)
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    # The first row also attaches the destination's link; the rest reuse it.
    assert max(latencies) < 0.1, f"latencies {latencies}"
    assert sorted(latencies)[2] < 0.05, f"latencies {latencies}"


def test_a_notify_flood_costs_an_idle_daemon_a_few_claims_a_second(workdir, database, broker):
    """Any login may pg_notify() the wakeup channel in a loop; NOTIFYs that wake only empty
    claims wake one per 200 ms after the first three, and a real row still goes out at once."""
    queue = unique("flood")
    port = free_port()
    consumer = Consumer(broker, queue)
    daemon = start_daemon(workdir, database, broker, http={"listen": f"127.0.0.1:{port}"},
                          dispatch={"poll_interval_ms": 60000})
    stop = threading.Event()

    def flood():
        conn = database.writer()  # autocommit, and no `with conn`: that would make one transaction of it
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    cur.execute("SELECT pg_notify('outbox_wakeup', '')")
        finally:
            conn.close()

    flooder = threading.Thread(target=flood)
    try:
        wait_until(lambda: ready(port), what="/readyz 200")
        consumer.quiet_for(1.0)  # idle, armed
        before = scrape(port)["outboxd_claim_duration_seconds_count"]
        flooder.start()
        time.sleep(3)
        claims = scrape(port)["outboxd_claim_duration_seconds_count"] - before
        with database.writer() as conn, conn.cursor() as cur:
            enqueue(cur, queue, "flood-real-1", b"x")
        committed = time.time()
        consumer.receive(1, timeout=5)
        waited = consumer.received[-1][0] - committed
    finally:
        stop.set()
        if flooder.is_alive():
            flooder.join()
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    assert claims <= 3 + 3 * 5 + 5, f"{claims} claims in 3 s of NOTIFYs"
    assert waited < 0.5, f"the row went out {waited:.3f} s after its commit"


def late_writer(workdir, database, broker, queue, before_daemon, after_arming):
    """Runs before_daemon(cursor) in a writer's transaction, starts the daemon (fallback poll 60 s),
    waits until it idles, runs after_arming(cursor), commits, and returns the one message that
    arrives and how long after the commit it arrived."""
    consumer = Consumer(broker, queue)
    config = write_config(f"{workdir}/outboxd.yaml", database, broker, dispatch={"poll_interval_ms": 60000})
    writer = database.writer(autocommit=False)
    try:
        with writer.cursor() as cur:
            before_daemon(cur)
        daemon = Daemon(config).start()
        try:
            assert consumer.quiet_for(1.0) == []  # claimed, armed, idle; nothing visible yet
            with writer.cursor() as cur:
                after_arming(cur)
            writer.commit()
            committed = time.time()
            [message] = consumer.receive(1, timeout=10)
            return message, consumer.received[-1][0] - committed
        finally:
            assert daemon.stop() == 0, daemon.log()
    finally:
        writer.close()
        consumer.close()


def test_a_commit_that_missed_the_arming_is_found_without_waiting_for_the_poll(workdir, database, broker):
    """The writer inserted before the daemon went idle, so its commit sends no NOTIFY, and it commits
    after the daemon's last claim: the daemon watches the transactions open when it armed."""
    queue = unique("late-commit")
    # No dispatcher is idle at the insert: nobody to notify.
    message, waited = late_writer(workdir, database, broker, queue,
                                  before_daemon=lambda cur: enqueue(cur, queue, "late-1", b"x"),
                                  after_arming=lambda cur: None)
    assert message.id == "late-1"
    # Checked with a delay that doubles while the transaction stays open (here about 1 s).
    assert waited < 2.5, f"arrived {waited:.3f}s after the commit"


def test_a_writer_whose_snapshot_predates_the_arming_is_found_without_waiting_for_the_poll(
        workdir, database, broker):
    """A REPEATABLE READ writer reads the idle flags as of its snapshot, taken before the daemon went
    idle, so its insert sends no NOTIFY; when the daemon armed, the writer had written nothing yet
    (no transaction id). The daemon watches it all the same."""
    queue = unique("snapshot")

    def take_snapshot(cur):  # no instance registered in it
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("SELECT 1")  # the first statement takes the snapshot

    message, waited = late_writer(workdir, database, broker, queue, before_daemon=take_snapshot,
                                  after_arming=lambda cur: enqueue(cur, queue, "snap-1", b"x"))
    assert message.id == "snap-1"
    assert waited < 2.5, f"arrived {waited:.3f}s after the commit"


def test_a_row_that_commits_late_below_the_cursor_of_a_long_pass_goes_out_at_the_next_claim(
        workdir, database, broker):
    """A writer holds a low id open while 35 rows above it commit and go out in four claims of 10;
    the fourth is short, so the next claim starts from the lowest id again and finds the late row."""
    queue = unique("late-low")
    consumer = Consumer(broker, queue)
    config = small_batches(workdir, database, broker, poll_interval_ms=1000)
    writer = database.writer(autocommit=False)
    try:
        with writer.cursor() as cur:
            enqueue(cur, queue, "late-low", b"x")
        with database.writer() as conn, conn.cursor() as cur:
            for i in range(35):
                enqueue(cur, queue, f"backlog-{i}", b"x")
        daemon = Daemon(config).start()
        try:
            assert len(consumer.receive(35, timeout=20)) == 35
            time.sleep(0.5)  # the pass ended; claims (poll, late-commit checks) go on
            writer.commit()
            committed = time.time()
            late = consumer.receive(1, timeout=8)
            waited = consumer.received[-1][0] - committed
        finally:
            assert daemon.stop() == 0, daemon.log()
    finally:
        writer.close()
        consumer.close()
    assert [m.id for m in late] == ["late-low"], "the late row below the cursor was not claimed"
    # The next claim after the commit: a late-commit check or the 1 s poll.
    assert waited < 2.5, f"arrived {waited:.3f}s after the commit"


def test_nested_header_parks_the_row_and_other_sessions_flow(workdir, database, broker):
    queue = unique("park")
    consumer = Consumer(broker, queue)
    daemon = start_daemon(workdir, database, broker,
                          dispatch={"max_attempts": 3, "backoff_initial_ms": 50, "backoff_max_ms": 200})
    # The schema refuses nested headers at insert; a row that got past it anyway
    # (constraint dropped and headers changed by hand, older schema) must still
    # be handled: parked at its first attempt, since a retry would fail the same way.
    database.query("ALTER TABLE outbox.messages DROP CONSTRAINT messages_row_valid")
    try:
        with database.connect(autocommit=False) as conn, conn.cursor() as cur:
            enqueue(cur, queue, "bad-1", b"x", session_id="bad")
            cur.execute("""UPDATE outbox.messages SET headers = '{"nested": {"a": 1}}' WHERE message_id = 'bad-1'""")
            enqueue(cur, queue, "bad-2", b"x", session_id="bad")
            for i in range(20):
                enqueue(cur, queue, f"good-{i}", b"x", session_id=f"good{i % 4}")
        received = consumer.receive(20, timeout=20)
        assert sorted(m.id for m in received) == sorted(f"good-{i}" for i in range(20))
        parked = wait_parked(database, "bad-1", timeout=10)
        assert consumer.quiet_for(0.5) == []
    finally:
        consumer.close()
        assert daemon.stop() == 0, daemon.log()
    attempts, last_error = parked[0]
    assert attempts == 1, "parked at once, not after max_attempts"
    assert last_error == 'headers: key "nested": arrays and objects are not supported'
    assert database.query("SELECT status FROM outbox.messages WHERE message_id = 'bad-2'") == [("pending",)]
    assert "parked row" in daemon.log()
