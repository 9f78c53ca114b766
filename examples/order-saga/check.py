"""Final-state check of the order saga, whatever language ran it: every order ends in exactly one correct state.

An order is final when it is
  Confirmed: paid in time, stock reserved; no compensation, nothing released or refunded; or
  Cancelled: its payment timeout fired while it was still awaiting payment, the stock was
             released once, and the money was refunded once if (and only if) a late
             payment came (none when the customer never paid).
Everything else is either not finished yet (a reply still on its way) or wrong:
a second reservation, release, capture or refund, a compensation without a
timeout, a refund of a confirmed order. check() tells the two apart, so a
caller can wait for the first to disappear and fail at once on the second.
"""

from collections import Counter


def load(cur):
    cur.execute("SELECT id, status, data, timeout_message_id FROM workflow.instances WHERE kind = 'order'")
    workflows = {row[0]: row[1:] for row in cur.fetchall()}
    cur.execute("SELECT workflow_id FROM workflow.processed_messages"
                " WHERE message_id = workflow_id || ':payment-timeout:1'")
    timeouts = {row[0] for row in cur.fetchall()}
    cur.execute("SELECT workflow_id, step, status FROM workflow.compensations")
    compensations = {(w, step): status for w, step, status in cur.fetchall()}
    cur.execute("SELECT order_id, kind, count(*) FROM shop.stock_moves GROUP BY 1, 2")
    stock = {(o, k): n for o, k, n in cur.fetchall()}
    cur.execute("SELECT order_id, kind, count(*) FROM shop.payment_moves GROUP BY 1, 2")
    payments = {(o, k): n for o, k, n in cur.fetchall()}
    return workflows, timeouts, compensations, stock, payments


def check(cur, orders, placed=None):
    """Returns (problems, unfinished, states) of the given order ids: wrong, under way, a count per final state.

    placed: the ids of every order placed (default: orders); a workflow of another id is wrong.
    """
    workflows, timeouts, compensations, stock, payments = load(cur)
    problems, unfinished, states = [], [], Counter()
    for order in orders:
        if order not in workflows:
            unfinished.append(f"{order}: not started")
            continue
        status, data, timeout_id = workflows[order]
        moves = {k: stock.get((order, k), 0) for k in ("reserve", "release")}
        moves.update({k: payments.get((order, k), 0) for k in ("capture", "abandon", "refund")})
        steps = {s: compensations.get((order, s)) for s in ("release-stock", "refund-payment")}
        wrong, open_ = judge(status, data, timeout_id, order in timeouts, moves, steps)
        problems += [f"{order} ({status}): {w}" for w in wrong]
        unfinished += [f"{order} ({status}): {u}" for u in open_]
        if not wrong and not open_:
            states[final_state(status, moves)] += 1
    extra = set(workflows) - set(placed or orders)
    problems += [f"{w}: a workflow nobody ordered" for w in sorted(extra)]
    return problems, unfinished, states


def judge(status, data, timeout_id, timeout_handled, moves, steps):
    """One order: (what is wrong, what is not finished yet)."""
    wrong = [f"{k} done {moves[k]} times" for k in moves if moves[k] > 1]
    if moves["capture"] and moves["abandon"]:
        wrong.append("payment both captured and abandoned")
    open_ = [] if moves["reserve"] else ["stock not reserved yet"]
    if status == "Confirmed":
        if moves["release"] or moves["refund"] or any(steps.values()):
            wrong.append(f"confirmed but compensated: {moves}, {steps}")
        if not moves["capture"] or not data.get("paid"):
            wrong.append("confirmed without a payment")
        if timeout_id is not None:
            wrong.append("confirmed with a timeout still armed")
    elif status == "Cancelled":
        if not timeout_handled or data.get("timedOut") is None:
            wrong.append("compensated without a timeout")
        if data.get("paid"):
            wrong.append("cancelled although paid in time")
        if steps["release-stock"] != "completed" or not moves["release"]:
            open_.append(f"stock release {steps['release-stock']}, {moves['release']} released")
        if moves["abandon"] and (moves["refund"] or steps["refund-payment"]):
            wrong.append("refunded a payment that never came")
        if moves["capture"] and (steps["refund-payment"] != "completed" or not moves["refund"]):
            open_.append(f"late payment: refund {steps['refund-payment']}, {moves['refund']} refunded")
        if not moves["capture"] and not moves["abandon"]:
            open_.append("payment service has not answered yet")
        if moves["refund"] and not moves["capture"]:
            wrong.append("refund without a capture")
    else:
        open_.append("not final")
    return wrong, open_


def final_state(status, moves):
    if status == "Confirmed":
        return "confirmed"
    return "cancelled, late payment refunded" if moves["refund"] else "cancelled, never paid"
