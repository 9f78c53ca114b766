"""An application's transaction in Python (psycopg2): the outbox errors it handles, a transition retried on 40001."""
import sys

import psycopg2
from psycopg2 import errors

RETRIED = (errors.SerializationFailure, errors.DeadlockDetected)  # 40001, 40P01: run the transaction again


def handle(conn, workflow_id, message_id, status, meanwhile=lambda attempt: None):
    """Applies one inbound message to a workflow in one transaction; returns the new version or None (duplicate)."""
    for attempt in range(1, 6):
        try:
            with conn, conn.cursor() as cur:  # commits, or rolls back if the block raises
                cur.execute("SELECT workflow.record_processed(%s, %s)", (workflow_id, message_id))
                if not cur.fetchone()[0]:
                    return None  # handled before: change and emit nothing
                cur.execute("SELECT version FROM workflow.instances WHERE id = %s", (workflow_id,))
                version = cur.fetchone()[0]
                meanwhile(attempt)  # here another process may save the same workflow
                cur.execute("SELECT workflow.save(%s, %s, %s, NULL)", (workflow_id, version, status))
                cur.execute("SELECT workflow.emit(%s, 'payments', %s, %s::jsonb)",
                            (workflow_id, f"{workflow_id}:capture-payment:1", '{"orderId": 42}'))
                return version + 1
        except RETRIED as e:
            print(f"attempt {attempt}: {e.pgcode} {type(e).__name__}, retrying")
    raise RuntimeError(f"{workflow_id}: gave up after 5 attempts")


def expect_error(conn, sql, params):
    try:
        with conn, conn.cursor() as cur:
            cur.execute(sql, params)
    except (errors.UniqueViolation, errors.InvalidParameterValue, errors.CheckViolation) as e:
        print(f"{e.pgcode} {type(e).__name__}: {e.diag.message_primary}")  # a bug to fix, not to retry


def main(url):
    app, other = psycopg2.connect(url), psycopg2.connect(url)
    with app, app.cursor() as cur:
        cur.execute("SELECT workflow.start('order-42', 'order-fulfilment', 'AwaitingInventory')")
        cur.execute("SELECT outbox.enqueue('orders', 'order-42:placed:1', %s::jsonb)", ('{"orderId": 42}',))
    expect_error(app, "SELECT outbox.enqueue('orders', 'order-42:placed:1', %s::jsonb)", ('{"orderId": 43}',))
    expect_error(app, "SELECT outbox.enqueue('orders', 'order-42:placed:2', headers => %s)", ('{"a": {"b": 1}}',))
    expect_error(app, "INSERT INTO outbox.messages (message_id, destination, headers) VALUES (%s, 'orders', %s)",
                 ("order-42:placed:2", '{"a": {"b": 1}}'))

    def other_saves_first(attempt):
        if attempt == 1:
            with other, other.cursor() as cur:
                cur.execute("SELECT workflow.save('order-42', 1, 'Cancelling', NULL)")
    version = handle(app, "order-42", "inventory:reserved:42", "AwaitingPayment", other_saves_first)
    print(f"saved version {version}")
    print(f"again: {handle(app, 'order-42', 'inventory:reserved:42', 'AwaitingPayment')}")


if __name__ == "__main__":
    main(sys.argv[1])
