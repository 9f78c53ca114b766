"""outboxd against a scripted AMQP peer: rejects, releases, modifies and forced closes."""

import collections
import time

from harness import Daemon, Peer, enqueue, run_cli, wait_until, write_config


def start(workdir, database, peer, /, **sections):
    sections.setdefault("dispatch", {}).update(backoff_initial_ms=50, backoff_max_ms=200, release_retry_ms=50)
    path = write_config(f"{workdir}/outboxd.yaml", database, peer, **sections)
    run_cli("migrate", "-c", path)
    return Daemon(path).start()


def fill(database, rows, sessions):
    with database.connect() as conn, conn.cursor() as cur:
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
        wait_until(lambda: database.query(
            "SELECT 1 FROM outbox.messages WHERE message_id = 'm0' AND status = 'parked'"), what="m0 parked")
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
    run_cli("migrate", "-c", write_config(f"{workdir}/migrate.yaml", database, peer))

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
        with database.connect() as conn, conn.cursor() as cur:
            for i in range(first, first + 2):
                enqueue(cur, "q", f"m{i}", str(i).encode(), session_id=f"s{i % 2}")
        added[0] += 2
        wait_until(lambda: dispatched(f"m{first + 1}"), timeout=20, what=f"m{first + 1} dispatched")
        time.sleep(0.5)  # and the claims after it

    daemons = [instance("park-a").start()]
    try:
        fill(database, 10, 2)
        wait_until(lambda: database.query(
            "SELECT 1 FROM outbox.messages WHERE message_id = 'm0' AND status = 'parked'"), what="m0 parked")
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
