"""Several instances at once: fair leases, takeover after kill -9 and SIGSTOP, graceful scale-down and scale-up."""

import collections
import os
import random
import re
import signal
import threading
import time

import pytest

from harness import Broker, Consumer, Daemon, Peer, unique, wait_until, write_config

WINDOW = 500
TTL_S, RENEW_S = 3.0, 1.0
SHORT_LEASES = {"lease_ttl_ms": 3000, "renew_interval_ms": 1000, "safety_margin_ms": 1000}


def fill(database, queue, rows, sessions, first=0):
    """Bulk insert through plain SQL; the body is the row's sequence number."""
    with database.writer() as conn, conn.cursor() as cur:
        cur.execute(
            "INSERT INTO outbox.messages (message_id, destination, session_id, body) "
            "SELECT 'm' || i, %s, 's' || (i %% %s), convert_to(i::text, 'UTF8') FROM generate_series(%s, %s - 1) i",
            (queue, sessions, first, first + rows))


def pending(database):
    return database.query("SELECT count(*) FROM outbox.messages WHERE status = 'pending'")[0][0]


def owners(database):
    """{owner: partition count} of the unexpired leases."""
    return dict(database.query("SELECT owner, count(*) FROM outbox.leases WHERE owner IS NOT NULL "
                               "AND expires_at > now() GROUP BY owner"))


def first_arrival_violations(arrivals):
    """(group, seq) pairs in arrival order: later rows of a session arriving first, counting first arrivals only."""
    seen, last, violations = set(), {}, 0
    for group, seq in arrivals:
        if seq in seen:
            continue
        seen.add(seq)
        if seq < last.get(group, -1):
            violations += 1
        last[group] = seq
    return violations


def not_sent(log):
    """Rows the daemon's AMQP thread did not send because the lease fence had passed."""
    return sum(int(m.group(1)) for m in re.finditer(r"(\d+) rows? not sent: the lease fencing deadline", log))


def audit_leases(database):
    """Logs every change of a lease's owner, with the old expiry, in the database's own clock:
    sampling could miss a hand-back between two looks, the trigger misses nothing."""
    with database.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE public.lease_changes (partition int, old_owner text, old_expires timestamptz, "
                    "new_owner text, epoch bigint, at timestamptz)")
        # SECURITY DEFINER: the trigger runs in the daemon's UPDATE, and the daemon's
        # dispatcher role may not write to this test's own table.
        cur.execute("CREATE FUNCTION public.log_lease_change() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER "
                    "AS $$ BEGIN "
                    "IF NEW.owner IS DISTINCT FROM OLD.owner THEN INSERT INTO public.lease_changes VALUES "
                    "(OLD.partition, OLD.owner, OLD.expires_at, NEW.owner, NEW.epoch, now()); END IF; "
                    "RETURN NEW; END $$")
        cur.execute("CREATE TRIGGER log_lease_change AFTER UPDATE ON outbox.leases "
                    "FOR EACH ROW EXECUTE FUNCTION public.log_lease_change()")


def double_owners(database):
    """Partitions taken from an owner whose lease had not expired (two unexpired owners at once)."""
    return database.query("SELECT partition, old_owner, new_owner, epoch FROM public.lease_changes "
                          "WHERE old_owner IS NOT NULL AND new_owner IS NOT NULL AND old_expires > at")


def takeovers(database):
    return database.query("SELECT count(*) FROM public.lease_changes "
                          "WHERE old_owner IS NOT NULL AND new_owner IS NOT NULL")[0][0]


@pytest.fixture
def rabbitmq():
    return Broker("rabbitmq")


def instance_config(workdir, database, broker, name, **extra):
    path = write_config(f"{workdir}/{name}.yaml", database, broker, dispatch={"in_flight": WINDOW, **extra},
                        leases={"instance_id": name, **SHORT_LEASES})
    return Daemon(path, name=name)


def test_kill_9_of_one_of_three_instances_again_and_again(workdir, database, rabbitmq):
    rows, sessions = 20000, 200
    queue = unique("instances-kill9")
    consumer = Consumer(rabbitmq, queue, credit=2000)
    audit_leases(database)
    fill(database, queue, rows, sessions)
    rng = random.Random(int(os.environ.get("OUTBOXD_TEST_SEED", "7")))
    generation = collections.Counter()

    def start(slot):
        generation[slot] += 1
        return instance_config(workdir, database, rabbitmq, f"kill9-{slot}-{generation[slot]}").start()

    daemons = {slot: start(slot) for slot in range(3)}
    kills, killed_names = 0, []
    deadline = time.monotonic() + 120
    try:
        # Kill while there is work left, at most 8 times, a few seconds apart.
        while kills < 8 and pending(database) > rows * 0.05 and time.monotonic() < deadline:
            time.sleep(rng.uniform(1.0, 2.0))
            consumer.receive(rows, timeout=0.1)
            slot = rng.randrange(3)
            daemons[slot].kill()
            killed_names.append(f"kill9-{slot}-{generation[slot]}")
            kills += 1
            # A new id: the dead instance's leases must expire before anyone takes them.
            daemons[slot] = start(slot)
            print(f"kill {kills} of {killed_names[-1]}: {pending(database)} pending, owners {owners(database)}")
        wait_until(lambda: pending(database) == 0, timeout=180, what="backlog drained after the kills")
        received = consumer.receive_all({f"m{i}" for i in range(rows)})
    finally:
        codes = [d.stop() for d in daemons.values()]
    consumer.close()
    assert codes == [0, 0, 0], "\n".join(d.log()[-3000:] for d in daemons.values())
    assert kills >= 3, f"only {kills} kills before the backlog ran low"
    ids = collections.Counter(m.id for m in received)
    lost = {f"m{i}" for i in range(rows)} - set(ids)
    duplicates = sum(ids.values()) - rows
    violations = first_arrival_violations((m.group_id, int(m.body)) for m in received)
    overlaps = double_owners(database)
    print(f"instances kill -9: rows={rows} kills={kills} lost={len(lost)} order_violations={violations} "
          f"duplicates={duplicates} takeovers={takeovers(database)} double_owners={len(overlaps)}")
    assert not lost, f"{len(lost)} rows lost, e.g. {sorted(lost)[:5]}"
    assert violations == 0
    assert duplicates <= kills * (WINDOW + 500)
    assert not overlaps, f"partitions taken before the old lease expired: {overlaps[:5]}"


def test_sigstop_past_the_lease_then_sigcont_publishes_and_marks_nothing_it_lost(workdir, database):
    sessions = 100
    # a's broker stops granting credit just before the pause and grants it again during
    # the pause, so a resumes with deliveries queued in its AMQP client and credit to send
    # them: exactly what its fencing deadline must stop.
    control = f"{workdir}/peer-a.control"
    peer_a, peer_b = Peer(workdir, "--credit", "20", "--control", control), Peer(workdir)
    audit_leases(database)
    a = Daemon(write_config(f"{workdir}/a.yaml", database, peer_a, dispatch={"in_flight": WINDOW},
                            retention={"mode": "keep"}, leases={"instance_id": "pause-a", **SHORT_LEASES}), "pause-a")
    b = Daemon(write_config(f"{workdir}/b.yaml", database, peer_b, dispatch={"in_flight": WINDOW},
                            retention={"mode": "keep"}, leases={"instance_id": "pause-b", **SHORT_LEASES}), "pause-b")
    written = [0]
    stop_writing = threading.Event()

    def writer():
        # A steady flow, so that both instances have work before, during and after the pause.
        while not stop_writing.is_set():
            fill(database, "paused", 100, sessions, first=written[0])
            written[0] += 100
            time.sleep(0.1)

    a.start()
    b.start()
    thread = threading.Thread(target=writer, daemon=True)
    try:
        wait_until(lambda: set(owners(database)) == {"pause-a", "pause-b"}, timeout=30, what="both hold leases")
        thread.start()
        time.sleep(2)
        with open(control, "w") as f:
            f.write("withhold")
        time.sleep(1)
        stopped_at = time.time()
        a.signal(signal.SIGSTOP)
        wait_until(lambda: owners(database) == {"pause-b": 64}, timeout=TTL_S + 5, what="b took every partition")
        taken_at = time.time()
        with open(control, "w") as f:
            f.write("grant")
        time.sleep(1)
        resumed_at = time.time()
        a.signal(signal.SIGCONT)
        time.sleep(6)
        stop_writing.set()
        thread.join()
        wait_until(lambda: pending(database) == 0, timeout=120, what="backlog drained")
        regained_at = database.query("SELECT extract(epoch FROM min(at))::float8 FROM public.lease_changes "
                                     "WHERE new_owner = 'pause-a' AND at > to_timestamp(%s)", (resumed_at,))[0][0]
        overlaps = double_owners(database)
    finally:
        stop_writing.set()
        codes = [a.stop(), b.stop()]
        peer_a.stop()
        peer_b.stop()
    assert codes == [0, 0], a.log()[-3000:] + b.log()[-3000:]
    assert regained_at, "a never took partitions back after the pause"
    by_a, by_b = peer_a.deliveries(), peer_b.deliveries()
    # Frames written before the pause may reach the peer during it; none may leave a
    # after it resumed until it holds leases again.
    late = [d for d in by_a if resumed_at <= d["t"] < regained_at]
    # Rows marked while b held every partition must have been published by b:
    # a's marks for partitions it lost are fenced off.
    marked = database.query("SELECT message_id FROM outbox.messages WHERE dispatched_at "
                            "BETWEEN to_timestamp(%s) AND to_timestamp(%s)", (taken_at, regained_at))
    ids_b = {d["id"] for d in by_b}
    marked_not_by_b = [m for (m,) in marked if m not in ids_b]
    delivered = collections.Counter(d["id"] for d in by_a + by_b if d["outcome"] == "accepted")
    lost = {f"m{i}" for i in range(written[0])} - set(delivered)
    violations = first_arrival_violations(
        (d["group"], int(d["body"])) for d in sorted(by_a + by_b, key=lambda d: d["t"]) if d["outcome"] == "accepted")
    print(f"instances sigstop: pauses=1 paused_s={resumed_at - stopped_at:.1f} rows={written[0]} lost={len(lost)} "
          f"order_violations={violations} duplicates={sum(delivered.values()) - len(delivered)} "
          f"published_without_lease={len(late)} not_sent={not_sent(a.log())} marked_after_loss={len(marked_not_by_b)} "
          f"regained_after_s={regained_at - resumed_at:.1f}")
    assert not lost
    assert not late, f"a published {len(late)} rows after resuming without leases, e.g. {late[:3]}"
    assert "not sent: the lease fencing deadline passed" in a.log(), "a had nothing queued to stop"
    assert not marked_not_by_b, f"rows marked while a held no lease, not published by b: {marked_not_by_b[:5]}"
    assert violations == 0
    assert not overlaps, f"partitions taken before the old lease expired: {overlaps[:5]}"


def test_sigterm_of_one_of_three_hands_over_without_duplicates(workdir, database, rabbitmq):
    rows, sessions = 20000, 200
    queue = unique("instances-scaledown")
    consumer = Consumer(rabbitmq, queue, credit=2000)
    audit_leases(database)
    daemons = [instance_config(workdir, database, rabbitmq, f"down-{i}").start() for i in range(3)]
    try:
        wait_until(lambda: len(owners(database)) == 3 and sum(owners(database).values()) == 64, timeout=30,
                   what="three instances sharing the partitions")
        fill(database, queue, rows, sessions)
        wait_until(lambda: pending(database) < rows * 0.7, timeout=60, what="dispatch under way")
        assert daemons[0].stop() == 0, daemons[0].log()[-3000:]
        stopped_at = time.time()
        assert "down-0" not in owners(database)
        wait_until(lambda: sum(owners(database).values()) == 64, timeout=5, what="partitions taken over")
        taken_s = time.time() - stopped_at
        wait_until(lambda: pending(database) == 0, timeout=120, what="backlog drained")
        received = consumer.receive_all({f"m{i}" for i in range(rows)})
    finally:
        codes = [d.stop() for d in daemons[1:]]
    consumer.close()
    assert codes == [0, 0]
    ids = collections.Counter(m.id for m in received)
    lost = {f"m{i}" for i in range(rows)} - set(ids)
    duplicates = sum(ids.values()) - rows
    violations = first_arrival_violations((m.group_id, int(m.body)) for m in received)
    print(f"instances sigterm: rows={rows} lost={len(lost)} order_violations={violations} "
          f"duplicates={duplicates} takeover_s={taken_s:.1f}")
    assert not lost
    assert violations == 0
    assert duplicates == 0
    assert not double_owners(database)


def test_takeover_after_kill_9_takes_about_the_lease_time(workdir, database, rabbitmq):
    queue = unique("instances-takeover")
    consumer = Consumer(rabbitmq, queue, credit=2000)
    victim = instance_config(workdir, database, rabbitmq, "takeover-victim").start()
    heir = instance_config(workdir, database, rabbitmq, "takeover-heir").start()
    try:
        wait_until(lambda: owners(database) == {"takeover-victim": 32, "takeover-heir": 32}, timeout=30,
                   what="two instances sharing the partitions")
        victim.kill()
        killed_at = time.monotonic()
        fill(database, queue, 2000, 200)
        wait_until(lambda: owners(database) == {"takeover-heir": 64}, timeout=TTL_S + 5, interval=0.02,
                   what="the heir holding every partition")
        takeover_s = time.monotonic() - killed_at
        wait_until(lambda: pending(database) == 0, timeout=60, what="rows of the dead instance dispatched")
        received = consumer.receive_all({f"m{i}" for i in range(2000)})
    finally:
        assert heir.stop() == 0, heir.log()[-3000:]
    consumer.close()
    print(f"instances takeover: takeover_s={takeover_s:.2f} lease_ttl_s={TTL_S} received={len(received)}")
    # The victim renewed at most renew_interval before dying; the heir notices at its next renewal.
    assert TTL_S - RENEW_S - 0.2 <= takeover_s <= TTL_S + RENEW_S + 0.5


def audit_row_changes(database, refused_writer):
    """Records every change of a row with the connection that made it (application_name 'outboxd <id>')
    and its partition's lease as that statement sees it; refuses every change by `refused_writer` until
    public.refused_writers is emptied. A test-only trigger: the product installs nothing like it."""
    with database.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE public.row_changes (id bigint, old_status text, new_status text, writer text, "
                    "lease_owner text, lease_expires timestamptz, at timestamptz)")
        cur.execute("CREATE TABLE public.refused_writers (writer text)")
        cur.execute("INSERT INTO public.refused_writers VALUES (%s)", (refused_writer,))
        # SECURITY DEFINER: the daemon's role may lack any right on these tables.
        cur.execute("CREATE FUNCTION public.audit_row_change() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER "
                    "AS $$ DECLARE w text := current_setting('application_name'); l record; BEGIN "
                    "IF EXISTS (SELECT 1 FROM public.refused_writers r WHERE r.writer = w) THEN "
                    "RAISE EXCEPTION 'changes by % refused by the test', w USING ERRCODE = 'lock_not_available'; "
                    "END IF; "
                    "SELECT owner, expires_at INTO l FROM outbox.leases WHERE partition = OLD.partition; "
                    "INSERT INTO public.row_changes VALUES (OLD.id, OLD.status, "
                    "CASE WHEN TG_OP = 'DELETE' THEN 'deleted' ELSE NEW.status END, w, l.owner, l.expires_at, now()); "
                    "IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; RETURN NEW; END $$")
        cur.execute("CREATE TRIGGER audit_row_change BEFORE UPDATE OR DELETE ON outbox.messages "
                    "FOR EACH ROW EXECUTE FUNCTION public.audit_row_change()")


def test_rows_change_only_by_the_unexpired_lease_owner_of_their_partition(workdir, database):
    """a's marks fail until it is paused, with every row accepted and none marked; b takes every
    partition and publishes the rows again (its broker gives no credit yet, so it marks nothing);
    a resumes and its marks reach the database while b holds the leases: the fence must leave b's
    rows alone. Every change of a row is checked against its partition's lease at that instant."""
    rows = 50
    control = f"{workdir}/peer-b.control"
    with open(control, "w") as f:
        f.write("withhold")
    peer_a, peer_b = Peer(workdir), Peer(workdir, "--credit", "100", "--control", control)
    audit_row_changes(database, "outboxd fence-a")
    a = Daemon(write_config(f"{workdir}/a.yaml", database, peer_a, retention={"mode": "keep"},
                            leases={"instance_id": "fence-a", **SHORT_LEASES}), "fence-a")
    b = Daemon(write_config(f"{workdir}/b.yaml", database, peer_b, retention={"mode": "keep"},
                            leases={"instance_id": "fence-b", **SHORT_LEASES}), "fence-b")
    try:
        a.start()
        wait_until(lambda: owners(database) == {"fence-a": 64}, timeout=30, what="a holds every partition")
        fill(database, "fenced", rows, 10)
        # Paused before its leases lapse (renewed within the last second, they last 3 s).
        wait_until(lambda: sum(d["outcome"] == "accepted" for d in peer_a.deliveries()) == rows, timeout=20,
                   interval=0.01, what="a's rows accepted (their marks refused)")
        a.signal(signal.SIGSTOP)
        database.query("DELETE FROM public.refused_writers")
        b.start()
        wait_until(lambda: owners(database) == {"fence-b": 64}, timeout=TTL_S + 10, what="b took every partition")
        a.signal(signal.SIGCONT)
        wait_until(lambda: "not recorded: lease lost" in a.log() or database.query(
            "SELECT 1 FROM public.row_changes WHERE writer = 'outboxd fence-a'"), timeout=10, what="a's marks")
        with open(control, "w") as f:
            f.write("grant")
        wait_until(lambda: pending(database) == 0, timeout=60, what="every row dispatched")
    finally:
        a.signal(signal.SIGCONT)
        codes = [a.stop(), b.stop()]
        peer_a.stop()
        peer_b.stop()
    assert codes == [0, 0], a.log()[-3000:] + b.log()[-3000:]
    trespasses = database.query(
        "SELECT id, old_status, new_status, writer, lease_owner, lease_expires, at FROM public.row_changes "
        "WHERE old_status = 'pending' AND (writer IS DISTINCT FROM 'outboxd ' || lease_owner OR lease_expires <= at)")
    assert not trespasses, f"{len(trespasses)} rows changed by an instance not holding their lease: {trespasses[:3]}"
    changes = database.query("SELECT count(*) FROM public.row_changes WHERE old_status = 'pending'")[0][0]
    assert changes >= rows


def test_instances_joining_mid_drain_take_their_share_without_duplicates(workdir, database, rabbitmq):
    # docs/design.md: surplus partitions are drained, then handed back, so a scale-up hands them over
    # without duplicates.
    rows, sessions = 20000, 200
    queue = unique("instances-scaleup")
    consumer = Consumer(rabbitmq, queue, credit=2000)
    audit_leases(database)
    daemons = [instance_config(workdir, database, rabbitmq, "up-0").start()]
    try:
        wait_until(lambda: owners(database) == {"up-0": 64}, timeout=30, what="one instance holding every partition")
        fill(database, queue, rows, sessions)
        wait_until(lambda: pending(database) < rows * 0.9, timeout=60, what="dispatch under way")
        daemons += [instance_config(workdir, database, rabbitmq, f"up-{i}").start() for i in (1, 2)]
        wait_until(lambda: len(owners(database)) == 3, timeout=30, interval=0.02, what="three instances sharing")
        left_when_shared = pending(database)
        wait_until(lambda: pending(database) == 0, timeout=120, what="backlog drained")
        received = consumer.receive_all({f"m{i}" for i in range(rows)})
    finally:
        codes = [d.stop() for d in daemons]
    consumer.close()
    assert codes == [0, 0, 0], "\n".join(d.log()[-3000:] for d in daemons)
    ids = collections.Counter(m.id for m in received)
    lost = {f"m{i}" for i in range(rows)} - set(ids)
    duplicates = sum(ids.values()) - rows
    violations = first_arrival_violations((m.group_id, int(m.body)) for m in received)
    print(f"instances scale-up: rows={rows} left_when_shared={left_when_shared} lost={len(lost)} "
          f"order_violations={violations} duplicates={duplicates}")
    assert left_when_shared > 0, "the backlog was gone before the new instances took partitions"
    assert not lost
    assert violations == 0
    assert duplicates == 0
    assert not double_owners(database)
