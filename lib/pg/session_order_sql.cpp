// Why a claimed row waits for an earlier row of its session. A claim leaves a
// row out, or flags it as passed over, for one of four reasons, each a
// predicate over the claimed row `m` and built on one statement of what a
// session is (same_session()):
//
//   behind_timeout()    an earlier row of its session is a due timeout still pending
//   not_blocked()       an earlier row of its session is parked or backing off
//   late_sessions()     its session has a late commit below the pass's cursor
//   session_in_order()  an earlier row of its session waits unclaimed in another destination
//
// The claims of outbox_sql.cpp combine them; what the daemon then does with a
// row passed over is dispatch::ClaimPass's; every other reason a row waits is
// listed in docs/design.md, "Why a pending row waits".
#include "pg/session_order_sql.hpp"

namespace outboxd::pg::outbox_sql {

std::string same_session(const std::string& a, const std::string& b) {
  return a + ".session_id = " + b + ".session_id AND " + a + ".writer IS NOT DISTINCT FROM " + b + ".writer";
}

namespace {

// The same identity as a value, for a hashed IN, which IS NOT DISTINCT FROM
// cannot be: a writer is a login role (session_user), never '', so '' stands
// for the NULL writer of rows written before 009 and the key equals where
// same_session() holds.
std::string session_key(const std::string& a) { return a + ".session_id, coalesce(" + a + ".writer, '')"; }

}  // namespace

namespace {

// Row `e` (an alias) is an earlier row of claimed row m's session.
std::string earlier_in_session(const std::string& e) { return same_session(e, "m") + " AND " + e + ".id < m.id"; }

}  // namespace

// Strict order among due rows: a row waits while an earlier row of its
// session is a due timeout still pending, in flight or beyond the limit of
// the claim that took it (timeouts are claimed in due_at order, not id
// order); the caller claims again once that timeout is marked. Implies
// messages_due_session_idx's predicate; its range (session, due so far) is
// usually empty. Most of the time no timeout is due at all: one look at the
// head of messages_scheduled_idx per statement (an InitPlan) then spares the
// probe per row.
//
// The immediate claim reads it as a column and the caller drops such rows:
// as a filter it made the generic plan sort every pending row instead of
// walking messages_ready_idx (the planner cannot know that it rarely holds),
// and the pass's cursor moves past those rows anyway. The scheduled claim,
// which has no cursor, filters: rows behind a timeout must not fill its batch.
std::string behind_timeout(const std::string& t) {
  return "(m.session_id IS NOT NULL "
         "AND coalesce((SELECT d.due_at <= now() FROM " + t + " d WHERE d.status = 'pending' "
         "AND d.due_at > d.created_at ORDER BY d.due_at LIMIT 1), false) "
         "AND EXISTS ("
         "SELECT 1 FROM " + t + " e WHERE " + earlier_in_session("e") + " AND e.status = 'pending' "
         "AND e.due_at > e.created_at AND e.due_at <= now()))";
}

// Strict per-session order: a parked or backing-off row blocks every
// later row of its session, not another writer's rows of the same session_id;
// the writer is compared on the few rows the index range finds. The
// predicate implies messages_blocked_idx's.
// While that index is empty, as it mostly is, one look at it per statement
// (an InitPlan) spares the probe per row, a tenth of the claim's time.
//
// Past the start of a pass (`cursor` > 0, the immediate claim only) a
// backing-off row below the cursor blocks its session until the pass ends,
// even once its time has come: the pass has moved past it, and its session's
// later rows must not go first. Late commits are not the only rows below the
// cursor that a claim must not overtake (late_commits_possible()).
std::string not_blocked(const std::string& t, const char* cursor) {
  const std::string backing_off = cursor == nullptr
                                      ? std::string("b.next_attempt_at > now()")
                                      : "b.next_attempt_at IS NOT NULL AND (b.next_attempt_at > now() OR b.id <= " +
                                            std::string(cursor) + ")";
  return "(m.session_id IS NULL "
         "OR NOT coalesce((SELECT true FROM " + t + " a WHERE a.status = 'parked' "
         "OR (a.status = 'pending' AND a.next_attempt_at IS NOT NULL) LIMIT 1), false) "
         "OR NOT EXISTS ("
         "SELECT 1 FROM " + t + " b WHERE " + earlier_in_session("b") + " "
         "AND (b.status = 'parked' OR (b.status = 'pending' AND " + backing_off + "))))";
}

// Past the start of a pass, the sessions of the claim's
// rows `c` that have an immediate pending row at or below the cursor $3
// that the caller does not hold ($4 lists every row it holds): a
// transaction that took its ids before the cursor passed them and committed
// after. Their rows in the claim come flagged as passed over: they and their
// session's later rows wait for the next pass, which starts below them. Left
// out by a filter instead, such rows were published twice by the hundreds
// when one of three instances stopped and handed its partitions over
// (fault.instances).
//
// Asked once per session of the claim, not once per row, through
// messages_session_pending_idx: a session's range below the cursor holds
// the rows of it the caller holds and little else. OFFSET 0 keeps the EXISTS
// a SubPlan run per session; pulled up into a join, the planner hashed every
// pending row below the cursor, whatever other partitions and parked
// sessions left there. Immediacy is tested as `due_at - created_at <=
// interval '0'`, an expression that no index predicate matches: written as
// the indexes of immediate rows state it, or as `NOT (due_at > created_at)`,
// which the planner turns into that same comparison, a plan made while the
// outbox looked empty (no statistics yet for a bulk just committed) walked
// messages_lane_idx over every row below the cursor, once per session: 1.3 s
// per claim at 200,000 rows, 0.44 s at 875 rows of 100 sessions, all the
// while no other statement of the run loop could run.
std::string late_sessions(const std::string& t) {
  return "SELECT s.session_id, s.writer FROM (SELECT DISTINCT c.session_id, c.writer "
         "FROM c WHERE c.session_id IS NOT NULL) s WHERE EXISTS (SELECT 1 FROM " + t + " l "
         "WHERE " + same_session("l", "s") + " AND l.id <= $3 "
         "AND l.status = 'pending' AND l.due_at - l.created_at <= interval '0' "
         "AND l.id NOT IN (SELECT unnest($4::bigint[])) OFFSET 0)";
}

// Asked of each row of `c` by a hash of the sessions of `late` (a hashed
// SubPlan, built once): compared one by one, a claim of 1,000 rows with as
// many late sessions (an instance's partitions handed over) made a million
// comparisons.
std::string in_late_session() {
  return "(m.session_id IS NOT NULL AND (" + session_key("m") + ") IN (SELECT " + session_key("s") + " FROM late s))";
}

// A row claimed by destination overtakes no unclaimed earlier row of its
// session in another destination: such a row (pending and due, not in $3)
// holds it back until it is claimed. Earlier rows of its own destination come
// first in the same lane. messages_session_pending_idx; a session's earlier
// pending rows are few, as strict order lets one go out at a time.
std::string session_in_order(const std::string& t) {
  return "(m.session_id IS NULL OR NOT EXISTS (SELECT 1 FROM " + t + " e WHERE " + earlier_in_session("e") +
         " AND e.status = 'pending' AND e.destination <> m.destination "
         "AND (e.due_at <= e.created_at OR e.due_at <= now()) AND e.id NOT IN (SELECT unnest($3::bigint[]))))";
}

}  // namespace outboxd::pg::outbox_sql
