"""kill -9 of outboxd, broker restarts and database restarts during a run: nothing lost."""

import collections
import os
import random
import subprocess
import time

import pytest

from harness import Broker, Consumer, Daemon, unique, wait_until, write_config

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
WINDOW = 500


def services(*args):
    subprocess.run([os.path.join(ROOT, "scripts", "services.sh"), *args], check=True, timeout=180)


def fill(database, queue, rows, sessions):
    """Bulk insert through plain SQL, as an application might."""
    with database.writer() as conn, conn.cursor() as cur:
        cur.execute(
            "INSERT INTO outbox.messages (message_id, destination, session_id, body) "
            "SELECT 'm' || i, %s, 's' || (i %% %s), convert_to(i::text, 'UTF8') FROM generate_series(0, %s - 1) i",
            (queue, sessions, rows))


def check_delivery(received, rows, max_duplicates):
    """Every row arrived; first arrivals keep per-session order; duplicates bounded."""
    ids = collections.Counter(m.id for m in received)
    missing = {f"m{i}" for i in range(rows)} - set(ids)
    assert not missing, f"{len(missing)} rows lost, e.g. {sorted(missing)[:5]}"
    duplicates = sum(ids.values()) - rows
    assert duplicates <= max_duplicates, f"{duplicates} duplicates > {max_duplicates}"
    seen, last, violations = set(), {}, 0
    for message in received:
        if message.id in seen:
            continue
        seen.add(message.id)
        seq = int(message.body)
        if seq < last.get(message.group_id, -1):
            violations += 1
        last[message.group_id] = seq
    assert violations == 0, f"{violations} per-session order violations"
    return duplicates


def pending(database):
    return database.query("SELECT count(*) FROM outbox.messages WHERE status = 'pending'")[0][0]


@pytest.fixture
def rabbitmq():
    return Broker("rabbitmq")


def test_kill_9_at_random_moments_loses_nothing(workdir, database, rabbitmq):
    rows, sessions, kills = 20000, 200, 6
    queue = unique("kill9")
    consumer = Consumer(rabbitmq, queue, credit=2000)
    # A fixed instance id, as a unit file would set: the restarted process
    # takes its own leases back at once instead of waiting for them to expire.
    path = write_config(f"{workdir}/outboxd.yaml", database, rabbitmq, dispatch={"in_flight": WINDOW},
                        leases={"instance_id": "kill9-host"})
    fill(database, queue, rows, sessions)
    rng = random.Random(int(os.environ.get("OUTBOXD_TEST_SEED", "7")))
    daemon = Daemon(path)
    for _ in range(kills):
        daemon.start()
        time.sleep(rng.uniform(0.3, 1.5))
        daemon.kill()
        consumer.receive(rows, timeout=0.2)
        print(f"killed: {pending(database)} pending, {len(consumer.received)} received")
    daemon.start()
    try:
        wait_until(lambda: pending(database) == 0, timeout=120, what="backlog drained after the kills")
        received = consumer.receive_all({f"m{i}" for i in range(rows)})
    finally:
        assert daemon.stop() == 0, daemon.log()
    consumer.close()
    duplicates = check_delivery(received, rows, max_duplicates=kills * (WINDOW + 500))
    print(f"kill -9: rows={rows} kills={kills} lost=0 duplicates={duplicates} received={len(received)}")


def drain(consumer, quiet=0.5):
    """Receives until nothing arrived for `quiet` seconds: what the broker holds now."""
    while consumer.receive(10 ** 9, timeout=quiet):
        pass


def test_kill_9_duplicates_per_kill_within_in_flight_plus_twice_batch_size(workdir, database, rabbitmq):
    # The rows a kill makes the next process publish again are the rows it held
    # published but unmarked: in flight, or accepted and waiting for their mark.
    # It holds at most in_flight + 2 * batch_size rows (README, "At least once").
    # Small values make that bound tight enough to mean something.
    in_flight, batch_size = 8, 4
    bound = in_flight + 2 * batch_size
    rows, sessions, kills = 20000, 200, 10
    queue = unique("kill9bound")
    consumer = Consumer(rabbitmq, queue, credit=2000)
    path = write_config(f"{workdir}/outboxd.yaml", database, rabbitmq,
                        dispatch={"in_flight": in_flight, "batch_size": batch_size},
                        leases={"instance_id": "kill9-bound-host"})
    fill(database, queue, rows, sessions)
    rng = random.Random(int(os.environ.get("OUTBOXD_TEST_SEED", "11")))
    daemon = Daemon(path)
    per_kill = []
    for _ in range(kills):
        daemon.start()
        time.sleep(rng.uniform(0.3, 0.8))
        daemon.kill()
        drain(consumer)
        # Received, yet still pending: the next process publishes these again.
        received = {m.id for _, m in consumer.received}
        still_pending = {r[0] for r in database.query(
            "SELECT message_id FROM outbox.messages WHERE status = 'pending'")}
        per_kill.append(len(received & still_pending))
    daemon.start()
    try:
        wait_until(lambda: pending(database) == 0, timeout=120, what="backlog drained after the kills")
        received = consumer.receive_all({f"m{i}" for i in range(rows)})
    finally:
        assert daemon.stop() == 0, daemon.log()
    consumer.close()
    print(f"kill -9: in_flight={in_flight} batch_size={batch_size} bound={bound} "
          f"published again per kill={per_kill}")
    assert max(per_kill) <= bound, f"a kill left {max(per_kill)} rows to publish again > {bound}: {per_kill}"
    assert sum(per_kill) > 0, "no kill landed while rows were unmarked: the test measured nothing"
    duplicates = check_delivery(received, rows, max_duplicates=kills * bound)
    print(f"kill -9: duplicates received={duplicates}, sum per kill={sum(per_kill)}")


@pytest.fixture
def artemis():
    return Broker("artemis")


def test_artemis_drops_every_row_100_kills_publish_again(workdir, database, artemis):
    """Artemis' duplicate detection (the artemis profile's _AMQ_DUPL_ID) against 100 kill -9 of the daemon, each
    while rows flow: every row arrives once, none lost, sessions in order. The default id-cache-size (20,000) is
    above what a kill can make the daemon publish again (in_flight + 2 * batch_size = 2,500 here)."""
    # Enough rows that the last kills still land while rows flow: a run drains about 700 rows between kills.
    rows, sessions, kills = 120000, 200, 100
    queue = unique("kill9dedup")
    consumer = Consumer(artemis, queue, credit=2000)
    # Short leases: a process killed before it took its partitions back leaves them to the next for a lease
    # time, which a default lease would make 30 s of a run without rows flowing.
    path = write_config(f"{workdir}/outboxd.yaml", database, artemis, dispatch={"in_flight": WINDOW},
                        leases={"instance_id": "kill9-dedup-host", "lease_ttl_ms": 3000, "renew_interval_ms": 1000,
                                "safety_margin_ms": 1000})
    fill(database, queue, rows, sessions)
    rng = random.Random(int(os.environ.get("OUTBOXD_TEST_SEED", "13")))
    daemon = Daemon(path)
    mid_run, published_again = 0, 0
    try:
        for _ in range(kills):
            before = pending(database)
            daemon.start()
            # Killed while rows flow: once this run's first rows are marked, at a random moment after.
            try:
                wait_until(lambda: pending(database) < before, timeout=60, interval=0.02, what="rows flowing")
            except AssertionError as stalled:
                raise AssertionError(f"after {mid_run} kills: {stalled}\n{daemon.log()[-4000:]}") from None
            time.sleep(rng.uniform(0, 0.1))
            daemon.kill()
            drain(consumer, quiet=0.1)
            # Received, yet still pending: the next process publishes these again, and Artemis must drop them.
            received = {m.id for _, m in consumer.received}
            still_pending = {r[0] for r in database.query(
                "SELECT message_id FROM outbox.messages WHERE status = 'pending'")}
            mid_run += len(still_pending) > 0
            published_again += len(received & still_pending)
        daemon.start()
        wait_until(lambda: pending(database) == 0, timeout=180, what="backlog drained after the kills")
        received = consumer.receive_all({f"m{i}" for i in range(rows)}, timeout=180)
    finally:
        code = daemon.stop()
        consumer.close()
    assert code == 0, daemon.log()[-5000:]
    print(f"kill -9 on Artemis: rows={rows} kills mid-run={mid_run} rows published again={published_again} "
          f"received={len(received)}")
    assert mid_run == kills, f"only {mid_run} of {kills} kills landed while rows were pending"
    assert published_again > 0, "no kill left a row published but unmarked: the test measured nothing"
    check_delivery(received, rows, max_duplicates=0)

def test_broker_restart_mid_run(workdir, database, rabbitmq):
    rows, sessions = 10000, 100
    queue = unique("brokerrestart")
    path = write_config(f"{workdir}/outboxd.yaml", database, rabbitmq,
                        dispatch={"in_flight": WINDOW}, broker={"reconnect_max_ms": 1000})
    consumer = Consumer(rabbitmq, queue, credit=2000)
    daemon = Daemon(path).start()
    received = []
    try:
        fill(database, queue, rows, sessions)
        wait_until(lambda: pending(database) < rows * 0.8, timeout=60, what="dispatch under way")
        consumer.receive(rows, timeout=0.2)
        received += [m for _, m in consumer.received]
        consumer.close()
        services("stop-rabbitmq")
        time.sleep(1)
        assert pending(database) > 0
        services("start-rabbitmq")
        consumer = Consumer(rabbitmq, queue, credit=2000)
        wait_until(lambda: pending(database) == 0, timeout=120, what="backlog drained after the restart")
        seen = {m.id for m in received}
        received += consumer.receive_all({f"m{i}" for i in range(rows)} - seen)
    finally:
        assert daemon.stop() == 0, daemon.log()
    consumer.close()
    check_delivery(received, rows, max_duplicates=WINDOW + 500)
    assert "broker connection lost" in daemon.log()


def test_database_restart_mid_run(workdir, database, rabbitmq):
    rows, sessions = 10000, 100
    queue = unique("pgrestart")
    path = write_config(f"{workdir}/outboxd.yaml", database, rabbitmq,
                        dispatch={"in_flight": WINDOW}, database={"reconnect_max_ms": 1000})
    consumer = Consumer(rabbitmq, queue, credit=2000)
    fill(database, queue, rows, sessions)
    daemon = Daemon(path).start()
    try:
        wait_until(lambda: pending(database) < rows * 0.8, timeout=60, what="dispatch under way")
        services("stop-pg", "immediate")
        time.sleep(1)
        services("start-pg")
        wait_until(lambda: pending(database) == 0, timeout=120, what="backlog drained after the restart")
        received = consumer.receive_all({f"m{i}" for i in range(rows)})
    finally:
        assert daemon.stop() == 0, daemon.log()
    consumer.close()
    check_delivery(received, rows, max_duplicates=WINDOW + 500)
    assert "database unavailable" in daemon.log()
