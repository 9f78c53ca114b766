"""outboxd against a scripted AMQP peer: outcomes and their metrics, forced closes, marks, shutdown, connection settings."""

import collections
import re
import signal
import socket
import time
import urllib.request

from harness import (Daemon, Peer, documented_series, enqueue, free_port, run_cli, wait_parked, wait_until,
                     write_config)



def start(workdir, database, peer, /, **sections):
    sections.setdefault("dispatch", {}).update(backoff_initial_ms=50, backoff_max_ms=200, release_retry_ms=50)
    return Daemon(write_config(f"{workdir}/outboxd.yaml", database, peer, **sections)).start()


def fill(database, rows, sessions):
    with database.writer() as conn, conn.cursor() as cur:
        for i in range(rows):
            enqueue(cur, "q", f"m{i}", str(i).encode(), session_id=f"s{i % sessions}")


def remaining(database):
    return database.query("SELECT count(*) FROM outbox.messages WHERE status = 'pending'")[0][0]


def test_reject_is_retried_with_backoff_then_dispatched(workdir, database):
    peer = Peer(workdir, "--reject", "m0:2")
    daemon = start(workdir, database, peer, retention={"mode": "keep"})
    try:
        fill(database, 10, 2)
        wait_until(lambda: remaining(database) == 0, timeout=20, what="all dispatched")
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()
    outcomes = [(d["id"], d["outcome"]) for d in peer.deliveries()]
    assert outcomes[:1] == [("m0", "rejected")]
    assert [o for o in outcomes if o[0] == "m0"] == [("m0", "rejected"), ("m0", "rejected"), ("m0", "accepted")]
    # Session s0 waited behind its head: m2 was published only after m0 was accepted.
    order = [d["id"] for d in peer.deliveries() if d["group"] == "s0" and d["outcome"] == "accepted"]
    assert order == [f"m{i}" for i in range(0, 10, 2)]
    assert database.query("SELECT attempts, status FROM outbox.messages WHERE message_id = 'm0'") == [(2, "dispatched")]


def test_row_is_parked_after_max_attempts_and_blocks_only_its_session(workdir, database):
    peer = Peer(workdir, "--reject", "m0:100")
    daemon = start(workdir, database, peer, dispatch={"max_attempts": 3})
    try:
        fill(database, 10, 2)
        wait_parked(database, "m0")
        wait_until(lambda: remaining(database) == 4, timeout=20, what="session s1 dispatched")
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()
    attempts, last_error = database.query("SELECT attempts, last_error FROM outbox.messages WHERE message_id = 'm0'")[0]
    assert attempts == 3
    assert "scripted reject of m0" in last_error
    published = {d["id"] for d in peer.deliveries()}
    assert not published & {"m2", "m4", "m6", "m8"}, "rows behind a parked row must wait"
    assert {"m1", "m3", "m5", "m7", "m9"} <= published


def test_released_and_modified_are_retried_without_counting_attempts(workdir, database):
    peer = Peer(workdir, "--release", "m0:2", "--modify", "m1:2")
    daemon = start(workdir, database, peer, retention={"mode": "keep"})
    try:
        fill(database, 4, 4)
        wait_until(lambda: remaining(database) == 0, timeout=20, what="all dispatched")
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()
    assert database.query("SELECT message_id, attempts FROM outbox.messages ORDER BY id") == [
        ("m0", 0), ("m1", 0), ("m2", 0), ("m3", 0)]
    counts = collections.Counter(d["id"] for d in peer.deliveries())
    assert counts["m0"] == 3 and counts["m1"] == 3


def test_forced_close_mid_batch_loses_nothing(workdir, database):
    rows, sessions = 2000, 20
    peer = Peer(workdir, "--close-after", "300", "--close-times", "3")
    daemon = start(workdir, database, peer, dispatch={"in_flight": 200}, broker={"reconnect_min_ms": 50})
    try:
        fill(database, rows, sessions)
        wait_until(lambda: remaining(database) == 0, timeout=60, what="all dispatched")
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()
    deliveries = peer.deliveries()
    accepted = [d for d in deliveries if d["outcome"] == "accepted"]
    assert {d["id"] for d in accepted} == {f"m{i}" for i in range(rows)}
    assert sum(d["outcome"] == "dropped" for d in deliveries) == 3
    duplicates = len(accepted) - rows
    assert duplicates <= 3 * 200, f"{duplicates} duplicates for 3 closes with a window of 200"
    # First acceptance per session is in id order.
    seen, last = set(), collections.defaultdict(lambda: -1)
    for d in accepted:
        if d["id"] in seen:
            continue
        seen.add(d["id"])
        seq = int(d["body"])
        assert seq > last[d["group"]]
        last[d["group"]] = seq
    assert "broker connection lost" in daemon.log()


def test_a_parked_row_holds_back_its_session_across_claims_restarts_and_instances(workdir, database):
    """After the park every claim must still pass over the rest of the session: claims of the same
    process woken by new rows, a restarted process, and a second instance."""
    peer = Peer(workdir, "--reject", "m0:100")

    def instance(name):
        return Daemon(write_config(f"{workdir}/{name}.yaml", database, peer, retention={"mode": "keep"},
                                   dispatch={"max_attempts": 3, "backoff_initial_ms": 50, "backoff_max_ms": 200},
                                   leases={"instance_id": name, "lease_ttl_ms": 3000, "renew_interval_ms": 1000,
                                           "safety_margin_ms": 1000}), name=name)

    def dispatched(message_id):
        return database.query("SELECT 1 FROM outbox.messages WHERE message_id = %s AND status = 'dispatched'",
                              (message_id,))

    added = [10]

    def more_rows_then_claims():
        """A row of each session; the other session's row going out shows that claims ran after it."""
        first = added[0]
        with database.writer() as conn, conn.cursor() as cur:
            for i in range(first, first + 2):
                enqueue(cur, "q", f"m{i}", str(i).encode(), session_id=f"s{i % 2}")
        added[0] += 2
        wait_until(lambda: dispatched(f"m{first + 1}"), timeout=20, what=f"m{first + 1} dispatched")
        time.sleep(0.5)  # and the claims after it

    daemons = [instance("park-a").start()]
    try:
        fill(database, 10, 2)
        wait_parked(database, "m0")
        more_rows_then_claims()
        assert daemons[0].stop() == 0, daemons[0].log()
        daemons[0] = instance("park-a").start()
        more_rows_then_claims()
        daemons.append(instance("park-b").start())
        wait_until(lambda: len(database.query("SELECT DISTINCT owner FROM outbox.leases "
                                              "WHERE expires_at > now()")) == 2, what="both instances hold leases")
        more_rows_then_claims()
    finally:
        codes = [d.stop() for d in daemons]
        peer.stop()
    assert codes == [0] * len(daemons), "\n".join(d.log()[-3000:] for d in daemons)
    behind = sorted({d["id"] for d in peer.deliveries() if d["group"] == "s0"} - {"m0"})
    assert behind == [], f"published behind the parked m0: {behind}"
    left = database.query("SELECT message_id FROM outbox.messages WHERE status = 'pending' ORDER BY id")
    assert left == [(f"m{i}",) for i in range(2, added[0], 2)]


def scrape(port):
    """/metrics as ({'name{labels}': value}, {name: type})."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
               for line in text.splitlines() if line and not line.startswith("#")}
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    return samples, types


def metric(port, name):
    """One sample of /metrics, None while the daemon does not serve it yet."""
    try:
        return scrape(port)[0].get(name)
    except OSError:
        return None


def test_metrics_count_what_docs_metrics_md_says(workdir, database):
    # m0 is rejected until parked (2 attempts), m1 released and m2 modified once; m3 goes straight through.
    peer = Peer(workdir, "--reject", "m0:100", "--release", "m1:1", "--modify", "m2:1")
    port = free_port()
    daemon = start(workdir, database, peer, dispatch={"max_attempts": 2}, http={"listen": f"127.0.0.1:{port}"})
    try:
        fill(database, 4, 4)
        wait_until(lambda: remaining(database) == 0 and metric(port, "outboxd_rows_dispatched_total") == 3,
                   timeout=20, what="m0 parked, the others dispatched")
        samples, types = scrape(port)
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()
    documented = documented_series()
    assert len(documented) == 26, documented
    for name, kind in documented.items():
        assert types.get(name) == kind, f"{name}: documented as {kind}, served as {types.get(name)}"
    outcomes = {o: samples[f'outboxd_outcomes_total{{outcome="{o}"}}']
                for o in ("accepted", "rejected", "released", "unknown", "not_sent")}
    assert outcomes == {"accepted": 3, "rejected": 2, "released": 2, "unknown": 0, "not_sent": 0}
    assert samples["outboxd_deliveries_sent_total"] == 7  # retries included
    assert samples["outboxd_rows_claimed_total"] >= 4
    assert samples["outboxd_rows_retried_total"] == 1
    assert samples["outboxd_rows_parked_total"] == 1
    assert samples['outboxd_disconnects_total{peer="database"}'] == 0
    assert samples['outboxd_disconnects_total{peer="broker"}'] == 0
    assert samples["outboxd_in_flight"] == 0 and samples["outboxd_buffered"] == 0
    assert samples["outboxd_partitions_held"] == 64
    assert samples["outboxd_redelivery_window_rows"] == 1000 + 2 * 1000  # in_flight + 2 * batch_size
    assert samples["outboxd_claim_duration_seconds_count"] >= 1
    assert samples["outboxd_mark_duration_seconds_count"] >= 1
    # Without database.wait_for_standby no claim waits and none is held.
    assert samples["outboxd_standby_wait_seconds_count"] == 0 and samples["outboxd_standby_waiting_rows"] == 0
    # A row published more than once is observed each time; only accepted ones reach until="accept".
    assert samples['outboxd_dispatch_delay_seconds_count{until="publish"}'] == 7
    assert samples['outboxd_dispatch_delay_seconds_count{until="accept"}'] == 3


def test_no_transaction_stays_open_while_deliveries_wait_for_the_broker(workdir, database):
    # README "No long transactions": claims and marks are short, nothing is held open meanwhile.
    peer = Peer(workdir, "--credit", "0")  # the broker never lets a delivery go: every row waits for it
    port = free_port()
    daemon = start(workdir, database, peer, dispatch={"shutdown_timeout_ms": 500},
                   http={"listen": f"127.0.0.1:{port}"}, leases={"instance_id": "waiting"})
    try:
        fill(database, 5, 5)
        wait_until(lambda: metric(port, "outboxd_in_flight") == 5, timeout=20, what="5 rows handed to AMQP")
        seen = []
        for _ in range(30):
            seen += database.query(
                "SELECT state, now() - xact_start FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = 'outboxd waiting' "
                "AND (state LIKE 'idle in transaction%%' OR now() - xact_start > interval '1 second')")
            time.sleep(0.05)
        assert database.query("SELECT count(*) FROM pg_stat_activity "
                              "WHERE application_name = 'outboxd waiting'")[0][0] >= 1, "sampled no session"
        assert seen == [], f"a transaction stayed open while waiting for the broker: {seen}"
        # README: SIGTERM waits up to shutdown_timeout_ms for the outstanding outcomes, then exits 0;
        # the rows still in flight stay pending for the next owner.
        stopping = time.monotonic()
        assert daemon.stop() == 0, daemon.log()
        assert 0.4 < time.monotonic() - stopping < 5
        assert remaining(database) == 5
    finally:
        if daemon.alive():
            daemon.stop()
        peer.stop()


def test_a_lone_row_is_marked_within_milliseconds_and_sigterm_leaves_no_lease_or_instance(workdir, database):
    # config/outboxd.yaml: outcomes are marked once batch_size of them wait, or 5 ms after the first.
    peer = Peer(workdir)
    daemon = start(workdir, database, peer, retention={"mode": "keep"}, dispatch={"batch_size": 500})
    try:
        fill(database, 1, 1)
        wait_until(lambda: remaining(database) == 0, timeout=20, what="m0 dispatched")
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()
    [accepted] = [d["t"] for d in peer.deliveries() if d["outcome"] == "accepted"]
    marked = database.query("SELECT extract(epoch FROM dispatched_at) FROM outbox.messages")[0][0]
    assert -0.05 < float(marked) - accepted < 0.5, f"marked {float(marked) - accepted:.3f} s after the accept"
    # docs/design.md "Shutdown": SIGTERM released every lease and deleted the instance row.
    assert database.query("SELECT count(*) FROM outbox.leases WHERE owner IS NOT NULL") == [(0,)]
    assert database.query("SELECT count(*) FROM outbox.instances") == [(0,)]


def test_the_connection_announces_its_container_id_and_idle_timeout(workdir, database):
    # config/outboxd.yaml: container_id defaults to leases.instance_id; half of idle_timeout_ms is announced.
    peer = Peer(workdir)
    daemon = start(workdir, database, peer, leases={"instance_id": "orders-7"}, broker={"idle_timeout_ms": 12000})
    try:
        fill(database, 1, 1)
        wait_until(lambda: remaining(database) == 0, timeout=20, what="m0 dispatched")
    finally:
        assert daemon.stop() == 0, daemon.log()
    path = write_config(f"{workdir}/named.yaml", database, peer, broker={"container_id": "outboxd-orders-1"})
    named = Daemon(path, name="named").start()
    try:
        with database.writer() as conn, conn.cursor() as cur:
            enqueue(cur, "q", "named-1", b"x")
        wait_until(lambda: remaining(database) == 0, timeout=20, what="named-1 dispatched")
    finally:
        assert named.stop() == 0, named.log()
        peer.stop()
    seen = {d["id"]: (d["container"], d["idle_timeout"]) for d in peer.deliveries()}
    assert seen == {"m0": ("orders-7", 6.0), "named-1": ("outboxd-orders-1", 15.0)}


def test_sigint_stops_the_daemon_as_sigterm_does(workdir, database):
    # docs/design.md: the loop's signalfd takes SIGTERM, SIGINT and SIGHUP; SIGINT (Ctrl-C) is a clean stop.
    peer = Peer(workdir)
    daemon = start(workdir, database, peer)
    try:
        wait_until(lambda: database.query("SELECT count(*) FROM outbox.leases WHERE owner IS NOT NULL") == [(64,)],
                   timeout=20, what="every partition leased")
        # config/outboxd.yaml: leases.instance_id defaults to host name and process id.
        assert database.query("SELECT instance_id FROM outbox.instances") == [
            (f"{socket.gethostname()}:{daemon.process.pid}",)]
        daemon.signal(signal.SIGINT)
        assert daemon.process.wait(timeout=30) == 0, daemon.log()
    finally:
        peer.stop()
    assert database.query("SELECT count(*) FROM outbox.leases WHERE owner IS NOT NULL") == [(0,)]


def test_retention_keep_purges_dispatched_rows_after_keep_for_s_and_cancelled_after_failed_keep_for_s(
        workdir, database):
    # config/outboxd.yaml retention: keep holds a row as 'dispatched' and purges it after keep_for_s;
    # a cancelled row stays for failed_keep_for_s (at least an hour), looking every purge_interval_ms.
    peer = Peer(workdir)
    daemon = start(workdir, database, peer, retention={"mode": "keep", "keep_for_s": 1, "failed_keep_for_s": 3600,
                                                       "purge_interval_ms": 100})
    try:
        with database.writer() as conn, conn.cursor() as cur:
            enqueue(cur, "q", "sent", b"x")
            cur.execute("SELECT now() + interval '1 hour'")
            enqueue(cur, "q", "called-off", b"x", due_at=cur.fetchone()[0])
            cur.execute("SELECT outbox.cancel('called-off')")
        wait_until(lambda: database.query("SELECT status FROM outbox.messages WHERE message_id = 'sent'")
                   == [("dispatched",)], timeout=20, what="sent kept as dispatched")
        wait_until(lambda: database.query("SELECT message_id FROM outbox.messages") == [("called-off",)],
                   timeout=5, what="the dispatched row purged, the cancelled one kept")
        time.sleep(0.5)  # several more purges: the cancelled row is younger than failed_keep_for_s
        assert database.query("SELECT message_id FROM outbox.messages") == [("called-off",)]
        database.query("UPDATE outbox.messages SET cancelled_at = now() - interval '61 minutes' "
                       "WHERE message_id = 'called-off' RETURNING id")
        wait_until(lambda: database.query("SELECT count(*) FROM outbox.messages") == [(0,)], timeout=5,
                   what="the cancelled row purged once older than failed_keep_for_s")
    finally:
        assert daemon.stop() == 0, daemon.log()
        peer.stop()


RATE = 100  # notify_max_rate of the load test below, rows/s


def test_under_load_the_daemon_is_not_idle_and_writers_send_no_notify(workdir, database):
    # README "Idle means idle": above notify_max_rate the daemon polls and clears its idle flag, so
    # writers send no NOTIFY; once rows slow down it waits for notifications again. The rate is set
    # well below what one writer manages on a busy machine, so that only the policy is tested.
    peer = Peer(workdir)
    daemon = start(workdir, database, peer, dispatch={"notify_max_rate": RATE})
    listener, writer = database.connect(), database.writer()  # autocommit: every enqueue commits at once
    try:
        wait_until(lambda: database.query("SELECT bool_and(idle) FROM outbox.instances") == [(True,)],
                   timeout=20, what="the daemon idle")
        listener.cursor().execute("LISTEN outbox_wakeup")
        idle_seen, notified, sent = [], 0, 0
        started = time.monotonic()
        while time.monotonic() - started < 3.0:  # 20 rows every 10 ms, as fast as one connection commits them
            writer.cursor().executemany("SELECT outbox.enqueue('q', %s, 'x')", [(f"load-{sent + i}",) for i in range(20)])
            sent += 20
            time.sleep(0.01)
            listener.poll()
            if time.monotonic() - started > 1.0:  # after a second in which the policy saw the rate
                idle_seen += database.query("SELECT idle FROM outbox.instances")[0]
                notified += len(listener.notifies)
            listener.notifies.clear()
        wait_until(lambda: remaining(database) == 0, timeout=30, what="the load dispatched")
        wait_until(lambda: database.query("SELECT idle FROM outbox.instances") == [(True,)], timeout=10,
                   what="the daemon idle again once the rows stopped")
    finally:
        listener.close()
        writer.close()
        assert daemon.stop() == 0, daemon.log()
        peer.stop()
    assert sent / 3.0 > 2 * RATE, f"the writer managed only {sent / 3.0:.0f} rows/s"
    # A writer stalled by a busy machine for a 100 ms window is a real lull, which the policy
    # answers with NOTIFY: allow a few such samples, not a daemon that stays idle under load.
    assert sum(idle_seen) <= len(idle_seen) // 3, f"idle {sum(idle_seen)} times of {len(idle_seen)} under load"
    assert notified <= sent // 4, f"{notified} NOTIFYs for {sent} rows under load"
