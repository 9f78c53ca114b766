"""A destination the broker ends the whole connection over (RabbitMQ 3.10 on an address outside Latin-1):
found and parked alone, while every other row flows and is charged no attempt (least-privilege roles)."""

import threading
import time

import pytest

from harness import Broker, Daemon, enqueue, unique, wait_until, write_config


@pytest.fixture
def broker():
    return Broker("rabbitmq")


def status(database, message_id):
    return database.query("SELECT status, attempts, last_error FROM outbox.messages WHERE message_id = %s",
                          (message_id,))[0]


def losses(daemon):
    return daemon.log().count("broker connection lost")


def writer_thread(database, destination, prefix, count, per_second, stop=None):
    """Writes `count` rows to `destination` (until `stop` is set), one session and one transaction each, at
    `per_second`; returns the thread."""
    def write():
        conn = database.writer()  # autocommit; `with conn` would make every row one transaction
        try:
            with conn.cursor() as cur:
                for i in range(count):
                    if stop is not None and stop.is_set():
                        break
                    enqueue(cur, destination, f"{prefix}{i}", b"fine", session_id=f"{prefix}{i}")
                    time.sleep(1.0 / per_second)
        finally:
            conn.close()
    thread = threading.Thread(target=write)
    thread.start()
    return thread


def test_a_destination_that_ends_the_connection_is_parked_alone(workdir, database, broker):
    """The generic profile does not know RabbitMQ 3.x's limit, so its link to /queue/заказы is attached: each
    attach ends the connection. The main connection ends once; the probe connection then tries the attach alone,
    and after three such losses its row is parked with the broker's words; 200 rows of another destination,
    written meanwhile, are all dispatched at attempt 0."""
    fine, bad = "/queue/" + unique("fine"), "/queue/" + unique("заказы")
    database.query("UPDATE outbox.settings SET allowed_address_prefixes = '{/queue/}'")
    daemon = Daemon(write_config(f"{workdir}/outboxd.yaml", database, broker, broker={"profile": "generic"},
                                 retention={"mode": "keep"})).start()
    try:
        wait_until(lambda: "database connected" in daemon.log(), what="connected")
        writer = writer_thread(database, fine, "fine-", 200, 20)
        time.sleep(0.5)
        with database.writer() as conn, conn.cursor() as cur:
            enqueue(cur, bad, "bad", b"bad", session_id="order-42")
        wait_until(lambda: status(database, "bad")[0] == "parked", timeout=120, interval=0.2, what="bad parked")
        writer.join()
        _, attempts, error = status(database, "bad")
        assert "times a link to this destination was attached alone" in error, error
        assert losses(daemon) == 1, daemon.log()  # the main connection's; the probe's are not logged

        wait_until(lambda: database.query("SELECT count(*) FROM outbox.messages WHERE message_id LIKE 'fine-%%' "
                                          "AND status = 'pending'")[0][0] == 0, timeout=60, what="fine rows sent")
        [(dispatched, charged, parked)] = database.query(
            "SELECT count(*) FILTER (WHERE status = 'dispatched'), count(*) FILTER (WHERE attempts > 0), "
            "count(*) FILTER (WHERE status = 'parked') FROM outbox.messages WHERE message_id LIKE 'fine-%%'")
        assert (dispatched, charged, parked) == (200, 0, 0)

        # The destination stays refused: a later row is parked without another attach.
        before = losses(daemon)
        with database.writer() as conn, conn.cursor() as cur:
            enqueue(cur, bad, "bad-again", b"bad", session_id="order-43")
        wait_until(lambda: status(database, "bad-again")[0] == "parked", timeout=30, what="second bad parked")
        assert losses(daemon) == before
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_suspects_are_tried_on_a_probe_connection_while_good_rows_flow(workdir, database, broker):
    """Five destinations RabbitMQ ends the connection over are tried on a probe connection of their own, one at a
    time, until each is parked with the broker's words; the main connection never attaches them again, so a
    writer's rows to another destination, one a second, each reach the broker within 5 s of their commit, and none
    is charged an attempt."""
    fine = "/queue/" + unique("fine")
    bad = ["/queue/" + unique(f"заказы{i}") for i in range(5)]
    database.query("UPDATE outbox.settings SET allowed_address_prefixes = '{/queue/}'")
    daemon = Daemon(write_config(f"{workdir}/outboxd.yaml", database, broker, broker={"profile": "generic"},
                                 retention={"mode": "keep"})).start()
    try:
        wait_until(lambda: "database connected" in daemon.log(), what="connected")
        done = threading.Event()
        writer = writer_thread(database, fine, "fine-", 1000, 1, stop=done)
        time.sleep(1)
        with database.writer() as conn, conn.cursor() as cur:
            for i, destination in enumerate(bad):
                enqueue(cur, destination, f"bad-{i}", b"bad", session_id=f"bad-{i}")
        try:
            wait_until(lambda: all(status(database, f"bad-{i}")[0] == "parked" for i in range(5)), timeout=120,
                       interval=0.5, what="every bad row parked")
            time.sleep(1)
        finally:
            done.set()
            writer.join()
        for i in range(5):
            assert "times a link to this destination was attached alone" in status(database, f"bad-{i}")[2]

        wait_until(lambda: database.query("SELECT count(*) FROM outbox.messages WHERE message_id LIKE 'fine-%%' "
                                          "AND status = 'pending'")[0][0] == 0, timeout=30, what="fine rows sent")
        [(rows, dispatched, charged, slowest)] = database.query(
            "SELECT count(*), count(*) FILTER (WHERE status = 'dispatched'), count(*) FILTER (WHERE attempts > 0), "
            "max(extract(epoch FROM dispatched_at - created_at)) FROM outbox.messages WHERE message_id LIKE 'fine-%%'")
        print(f"good rows {rows}, slowest {slowest:.2f} s from commit to dispatched, "
              f"main connection losses {losses(daemon)}")
        assert rows >= 15 and (dispatched, charged) == (rows, 0)
        assert slowest < 5.0, slowest
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_a_row_cancelled_in_sql_is_not_sent_again(workdir, database, broker):
    """Cancelled in SQL after the first connection it ended, the row is not sent again from memory: the resets stop."""
    bad = "/queue/" + unique("заказы")
    database.query("UPDATE outbox.settings SET allowed_address_prefixes = '{/queue/}'")
    daemon = Daemon(write_config(f"{workdir}/outboxd.yaml", database, broker, broker={"profile": "generic"})).start()
    try:
        wait_until(lambda: "database connected" in daemon.log(), what="connected")
        with database.writer() as conn, conn.cursor() as cur:
            enqueue(cur, bad, "bad", b"bad")
        wait_until(lambda: losses(daemon) >= 1, timeout=30, interval=0.2, what="a connection lost")
        # As a DBA would: outbox.cancel() is for rows not yet due.
        database.query("UPDATE outbox.messages SET status = 'cancelled', cancelled_at = now() "
                       "WHERE message_id = 'bad'")
        settled = losses(daemon)
        time.sleep(12)  # RabbitMQ 3.10 ends such a connection about 3 s after the attach
        assert losses(daemon) <= settled + 1, daemon.log()  # at most the attach under way as it was cancelled
        assert status(database, "bad")[0] == "cancelled"
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_the_rabbitmq_profile_parks_a_name_beyond_latin1_unsent(workdir, database, broker):
    """The rabbitmq profile knows the limit: заказы is parked at once, café goes out, the connection stays up."""
    daemon = Daemon(write_config(f"{workdir}/outboxd.yaml", database, broker, retention={"mode": "keep"})).start()
    try:
        wait_until(lambda: "database connected" in daemon.log(), what="connected")
        with database.writer() as conn, conn.cursor() as cur:
            enqueue(cur, unique("заказы"), "cyrillic", b"x")
            enqueue(cur, unique("café"), "latin1", b"x")
        wait_until(lambda: status(database, "cyrillic")[0] == "parked", what="parked")
        wait_until(lambda: status(database, "latin1")[0] == "dispatched", what="dispatched")
        assert "beyond Latin-1" in status(database, "cyrillic")[2]
        assert losses(daemon) == 0, daemon.log()
    finally:
        assert daemon.stop() == 0, daemon.log()
