"""Delivery policy per destination: against RabbitMQ a rate limit kept beside others at full speed and lifted by
SIGHUP, a priority class beside a bulk; against the scripted peer a stalled destination kept to its max_in_flight
(least-privilege roles)."""

import json
import signal
import statistics
import threading
import time
import urllib.request

import pytest

from harness import (Broker, Consumer, Daemon, Peer, free_port, pending_of, rabbitmqctl, run_cli, unique,
                     wait_until, write_config)
from tenant_copies import percentile

# 100 sessions of the destination's own: a session spanning two destinations would hold the second's rows
# behind the first's, limited or not (per-session order).
BULK_SQL = ("INSERT INTO outbox.messages (message_id, destination, session_id, body) "
            "SELECT %(d)s || ':' || i, %(d)s, %(d)s || ':s' || (i %% 100), convert_to(lpad(i::text, 200, 'x'), 'UTF8') "
            "FROM generate_series(1, %(n)s) i")


@pytest.fixture
def broker():
    return Broker("rabbitmq")


def bulk(database, destination, rows):
    with database.writer() as conn, conn.cursor() as cur:
        cur.execute(BULK_SQL, {"d": destination, "n": rows})


def delete_queues(*names):
    """The test's queues go with it: a bulk left in RabbitMQ would weigh on the tests after it."""
    for name in names:
        try:
            rabbitmqctl("delete_queue", name)
        except Exception:  # never declared: the daemon sent nothing there
            pass


def drain_seconds(database, destination, rows, timeout=300):
    """Seconds until the destination has no pending row left; the clock starts now."""
    began = time.monotonic()
    wait_until(lambda: pending_of(database, destination) == 0, timeout=timeout, interval=0.1,
               what=f"{rows} rows of {destination} drained")
    return time.monotonic() - began


RATE = 200
WINDOW_S = 30
ROWS = 20_000


def test_a_rate_limit_holds_beside_destinations_at_full_speed_and_a_reload_lifts_it(workdir, database, broker):
    """A destination limited to 200 rows/s with a 20,000-row backlog delivers 200 +- 10 rows/s over 30 s while
    another destination's 20,000 rows drain as fast as they do alone; SIGHUP without the limit drains the rest."""
    metered, alone, beside = unique("metered"), unique("alone"), unique("beside")
    path = f"{workdir}/outboxd.yaml"
    write_config(path, database, broker, destinations=[{"name": metered, "max_rate": RATE}])
    consumer = Consumer(broker, metered, credit=1000)
    daemon = Daemon(path).start()
    try:
        wait_until(lambda: "database connected" in daemon.log(), what="connected")
        bulk(database, alone, ROWS)
        alone_s = drain_seconds(database, alone, ROWS)
        bulk(database, metered, ROWS)
        began = time.time()
        bulk(database, beside, ROWS)
        result = {}
        watcher = threading.Thread(target=lambda: result.update(beside_s=drain_seconds(database, beside, ROWS)))
        watcher.start()
        consumer.receive(10 ** 9, timeout=WINDOW_S + 3)
        watcher.join(timeout=300)
        window = [at for at, _ in consumer.received if began + 3 <= at < began + 3 + WINDOW_S]
        per_second = [0] * (WINDOW_S + 3)
        for at, _ in consumer.received:
            if began <= at < began + WINDOW_S + 3:
                per_second[int(at - began)] += 1
        print("\nper second:", per_second)
        rate = len(window) / WINDOW_S
        print(f"\n{metered}: {rate:.1f} rows/s over {WINDOW_S} s (limit {RATE}); {ROWS} rows of another "
              f"destination drained in {result.get('beside_s', float('nan')):.1f} s beside it, "
              f"{alone_s:.1f} s alone")
        assert abs(rate - RATE) <= 10, rate
        assert "beside_s" in result, "the other destination did not drain"
        assert result["beside_s"] <= max(alone_s * 1.5, alone_s + 2), (result["beside_s"], alone_s)

        # The limit is the operator's to lift, at run time.
        write_config(path, database, broker)
        daemon.signal(signal.SIGHUP)
        wait_until(lambda: "reload: applied destinations" in daemon.log(), what="the reload applied")
        left = pending_of(database, metered)
        lifted_s = drain_seconds(database, metered, left, timeout=120)
        print(f"after the reload: {left} rows left drained in {lifted_s:.1f} s ({left / lifted_s:.0f} rows/s)")
        assert left / lifted_s > 4 * RATE, (left, lifted_s)
        consumer.receive_all([f"{metered}:{i}" for i in range(1, ROWS + 1)], timeout=120)
        ids = [m.id for _, m in consumer.received]
        assert len(set(ids)) == ROWS, f"{len(set(ids))} distinct of {ROWS}"
    finally:
        consumer.close()
        code = daemon.stop(timeout=60)
        delete_queues(metered, alone, beside)
    assert code == 0, daemon.log()[-5000:]


BULK_ROWS = 200_000
PRIORITY_ROWS = 100  # p99 of 100 is the second slowest: one hiccup of a shared machine is not the figure


def test_a_priority_class_goes_ahead_of_a_bulk_of_a_lower_class(workdir, database, broker):
    """Behind a 200,000-row bulk of class 0, rows of a destination of class 10 go out while the bulk drains: p99
    commit to consumer within 100 ms (p50 and p99 printed: docs/performance.md)."""
    payments, backlog = unique("payments"), unique("bulk")
    path = write_config(f"{workdir}/outboxd.yaml", database, broker,
                        destinations=[{"name": payments, "priority": 10}])
    consumer = Consumer(broker, payments)
    daemon = Daemon(path).start()
    committed = {}
    try:
        wait_until(lambda: "database connected" in daemon.log(), what="connected")
        bulk(database, backlog, BULK_ROWS)
        wait_until(lambda: pending_of(database, backlog) < BULK_ROWS - 5000, timeout=60, what="the bulk under way")
        for i in range(PRIORITY_ROWS):
            with database.writer() as conn, conn.cursor() as cur:
                cur.execute("INSERT INTO outbox.messages (message_id, destination, body) VALUES (%s, %s, 'x')",
                            (f"pay-{i}", payments))
            committed[f"pay-{i}"] = time.time()
            consumer.receive(1, timeout=0.1)
        consumer.receive_all(list(committed), timeout=30)
        left = pending_of(database, backlog)
    finally:
        consumer.close()
        code = daemon.stop(timeout=60)
        delete_queues(payments, backlog)
    arrived = {}
    for at, message in consumer.received:
        arrived.setdefault(message.id, at)
    latencies = [arrived[i] - t for i, t in committed.items() if i in arrived]
    print(f"\n{len(latencies)} of {len(committed)} priority rows: p50 {statistics.median(latencies) * 1000:.0f} ms "
          f"p99 {percentile(latencies, 99) * 1000:.0f} ms, with {left} bulk rows still pending")
    assert code == 0, daemon.log()[-5000:]
    assert len(latencies) == len(committed)
    assert left > 0, "the bulk drained before the priority rows were written: no contention shown"
    assert percentile(latencies, 99) <= 0.1, sorted(latencies)


def test_a_stalled_destination_keeps_to_max_in_flight_and_leaves_the_window_to_others(workdir, database):
    """A destination whose deliveries never get an outcome (the scripted peer holds them, as a broker whose
    consumer stalls would) has at most its max_in_flight of 50 in flight; another destination's 2,000 rows all go
    out meanwhile through the rest of the window, and the metrics show the limit holding the rest."""
    peer = Peer(workdir, "--hold", "stalled")
    port = free_port()
    path = write_config(f"{workdir}/outboxd.yaml", database, peer,
                        dispatch={"in_flight": 200, "shutdown_timeout_ms": 500},
                        destinations=[{"name": "stalled", "max_in_flight": 50}],
                        http={"listen": f"127.0.0.1:{port}"})
    daemon = Daemon(path).start()
    try:
        bulk(database, "stalled", 1000)
        bulk(database, "other", 2000)
        wait_until(lambda: pending_of(database, "other") == 0, timeout=60, what="the other destination drained")
        time.sleep(0.5)  # time for a 51st delivery, were the limit not kept
        held = [d for d in peer.deliveries() if d["outcome"] == "held"]
        accepted = [d for d in peer.deliveries() if d["outcome"] == "accepted"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            metrics = reply.read().decode()
    finally:
        code = daemon.stop()
        peer.stop()
    print(f"\nstalled: {len(held)} deliveries held by the peer; other: {len(accepted)} accepted")
    assert len(held) == 50, len(held)
    assert len(accepted) == 2000, len(accepted)
    assert 'outboxd_destination_in_flight{destination="stalled"} 50' in metrics
    assert 'outboxd_destination_policy{destination="stalled",setting="max_in_flight"} 50' in metrics
    held_rows = [line for line in metrics.splitlines()
                 if line.startswith('outboxd_destination_held_rows{destination="stalled",limit="in_flight"}')]
    assert held_rows and float(held_rows[0].split()[-1]) > 0, held_rows
    assert code == 0, daemon.log()[-5000:]
    assert pending_of(database, "stalled") == 1000  # held, never accepted: nothing marked


def test_status_shows_the_delivery_policy(workdir, database, broker):
    """outboxd status names each destination's policy, the burst in effect included; --json gives it as data."""
    path = write_config(f"{workdir}/outboxd.yaml", database, broker,
                        destinations=[{"name": "payments", "priority": 10},
                                      {"name": "partner-api", "max_rate": 200, "max_in_flight": 50}])
    text = run_cli("status", "-c", path).stdout
    assert "delivery policy (destinations:):" in text
    assert "  payments: priority 10\n" in text
    assert "  partner-api: max_rate 200/s (burst 20), max_in_flight 50\n" in text
    report = json.loads(run_cli("status", "--json", "-c", path).stdout)
    assert report["policy"] == [
        {"destination": "payments", "priority": 10, "max_rate": 0, "burst": 0, "max_in_flight": 0},
        {"destination": "partner-api", "priority": 0, "max_rate": 200, "burst": 20, "max_in_flight": 50}]
