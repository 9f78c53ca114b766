// The SQL of the dispatch loop, written against the partial indexes of 001_outbox.sql and 004_due_order.sql.
#include "pg/outbox_sql.hpp"
#include "pg/session_order_sql.hpp"

#include <array>
#include <string_view>

namespace outboxd::pg::outbox_sql {
namespace {

// Claims are read in binary format (see OutboxStore::claim), so every column
// must be of a type Rows reads in binary: text-like, bytea, int, bigint,
// boolean, or timestamptz read as the bigint it is sent as.
// One entry per Column, in its order; passed_over comes last and varies per claim.
constexpr std::array<std::string_view, kColumnCount - 1> kClaimColumns{
    "m.id", "m.message_id", "m.destination", "m.session_id", "m.writer", "m.correlation_id", "m.parent_message_id",
    "m.originating_message_id", "m.subject", "m.content_type", "m.traceparent", "m.headers::text", "m.body",
    "(extract(epoch FROM m.ttl) * 1000)::bigint",
    "m.created_at", "m.due_at",  // timestamptz in binary: microseconds since 2000-01-01, no numeric per row
    "m.due_at > m.created_at",
    "m.attempts", "m.partition",
    "(date_part('epoch', now() - greatest(m.created_at, m.due_at, m.next_attempt_at)) * 1000000)::bigint",
    "m.payload_bytes", "destination_refused"};
// std::array fills missing entries with empty views: an empty one means a
// Column has no expression, i.e. the enum and this list disagree.
constexpr bool every_column_named() {
  for (const std::string_view column : kClaimColumns) {
    if (column.empty()) return false;
  }
  return true;
}
static_assert(every_column_named(), "outbox_sql::Column and kClaimColumns must list the same columns");
static_assert(kPassedOver == kColumnCount - 1, "passed_over is the last column every claim has");

// The payload of a row: what reading it costs in memory. octet_length of a
// stored bytea reads its size, not its value.
constexpr std::string_view kPayload = "octet_length(m.body)::bigint + octet_length(m.headers::text)";

// The setting that refuses a stored row's destination, NULL if none does
// (destination_allowed()'s test, inlined, naming the rule that fails):
// destination_charset (021) for one beyond Latin-1 while it is latin1, then
// allowed_destinations (016) for a plain name outside the list, the order of
// destination_problem(). Whether either is set is read once per statement
// (an InitPlan) and tested first, so that while neither is, as by default,
// nothing more is evaluated per row (the regular expression of
// address_or_reserved() took a tenth of the claim's time); each setting is
// read only once that answer is no.
std::string destination_refused(const std::string& s) {
  const std::string settings = " FROM " + s + ".settings st)";
  const std::string list = "(SELECT st.allowed_destinations" + settings;
  return "CASE WHEN (SELECT st.allowed_destinations IS NULL AND st.destination_charset <> 'latin1'" + settings +
         " THEN NULL "
         "WHEN (SELECT st.destination_charset = 'latin1'" + settings + " AND " + s +
         ".beyond_latin1(m.destination) THEN 'destination_charset' "
         "WHEN " + list + " IS NOT NULL AND NOT (" + s + ".address_or_reserved(m.destination) OR " + s +
         ".plain_name_allowed(m.destination, " + list + ")) THEN 'allowed_destinations' END";
}

// `passed_over_column` says which rows the pass passes over, or is false where the claim filters them out;
// `inline_limit` the parameter above which a row comes without body and headers.
std::string columns(const std::string& s, const std::string& passed_over_column, const char* inline_limit) {
  std::string out;
  for (std::size_t i = 0; i < kClaimColumns.size(); ++i) {
    if (i == kDestinationRefused) {
      out.append(destination_refused(s)).append(", ");
    } else if (i == kBody || i == kHeaders) {
      out.append("CASE WHEN m.payload_bytes > ").append(inline_limit).append("::bigint THEN NULL ELSE ");
      out.append(kClaimColumns[i]).append(" END, ");
    } else {
      out.append(kClaimColumns[i]).append(", ");
    }
  }
  return out + passed_over_column;
}

// The rows of `inner` (a SELECT of "m.*" and more, ending in its ORDER BY
// `order`, LIMIT and locks) with their payload, read as `m`, in the same order.
std::string bounded_claim(const std::string& columns_list, const std::string& t, const std::string& where,
                          const std::string& order, const std::string& tail) {
  return "SELECT " + columns_list + " FROM (SELECT m.*, " + std::string(kPayload) + " AS payload_bytes FROM " +
         t + " m WHERE " + where + " ORDER BY " + order + tail + ") m ORDER BY " + order;
}

// The partitions $1, tested per row only when they are not all of them (an
// InitPlan): a single instance holds every partition, and a linear search of
// its 64 per row was a twentieth of the claim's time.
std::string ready(const std::string& s, const std::string& t, const char* cursor = nullptr) {
  return "((SELECT cardinality($1::int[]) >= st.partition_count FROM " + s + ".settings st) "
         "OR m.partition = ANY($1::int[])) "
         "AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= now()) "
         "AND " + not_blocked(t, cursor);
}

// Rows the caller knows already (in flight, waiting, or accepted and not yet
// marked) are left out before anything else is evaluated: a hashed SubPlan,
// one hash table per statement. Otherwise every new pass over a backlog read
// them all again, bodies included, and a claim full of them took the place of
// the rows behind them.
std::string not_known(const char* ids) {
  return std::string(" AND m.id NOT IN (SELECT unnest(") + ids + "::bigint[]))";
}

// Lease fencing: only rows of partitions this instance (parameter `owner`)
// still holds unexpired change, so an instance that lost a partition, paused
// past its lease say, cannot mark or fail rows its next owner handles.
std::string fence(const std::string& leases, const char* column, const char* owner) {
  // ARRAY(...) is an InitPlan, evaluated once per statement. Written as a
  // semi-join the planner put the leases outside and repeated the id = ANY
  // index scan once per leased partition (64 times for one instance). The
  // array is searched per row only when `owner` does not hold every
  // partition (a second InitPlan), as in ready().
  const std::string leased = "f.owner = " + std::string(owner) + " AND f.expires_at > now()";
  return std::string(" AND ((SELECT count(*) FILTER (WHERE ") + leased + ") = count(*) FROM " + leases + " f) OR " +
         column + " = ANY (ARRAY(SELECT f.partition FROM " + leases + " f WHERE " + leased + ")))";
}

// Whether a late commit below the cursor can exist, once per statement (an
// InitPlan). $6 is the pass's horizon: a snapshot (pg_snapshot as text)
// taken no later than any claim of the pass that could have read a late
// row's id, NULL for "ask anyway"; $7 the ids of this connection's own
// transactions since then (marks and failures; they insert no row).
//
// A row is late when the claim that walked past its id did not see it: its
// transaction was still running then, so it was running at the horizon too
// (listed in its xip, or at or above its xmax), and it has finished by now.
// Transactions running at the horizon that have finished by this
// statement's snapshot are counted by arithmetic on the two snapshots:
// those of the horizon's xip no longer running, plus every id from the
// horizon's xmax to the current xmax less those still running. Subtransaction
// ids and other databases' transactions count too, which only asks the
// probe needlessly. When all of them are the caller's own, no late row can
// exist and the probe is skipped: a drain with no concurrent writer never
// pays for it. A snapshot whose xmax went backwards (another server) asks.
std::string late_commits_possible() {
  const std::string own = "unnest($7::bigint[]) o";
  return "($3 > 0 AND ($6::text IS NULL OR (SELECT "
         "pg_snapshot_xmax(k) < pg_snapshot_xmax(h) "
         "OR pg_snapshot_xmax(k)::text::numeric - pg_snapshot_xmax(h)::text::numeric "
         "- (SELECT count(*) FROM pg_snapshot_xip(k) x WHERE x >= pg_snapshot_xmax(h)) "
         "+ (SELECT count(*) FROM pg_snapshot_xip(h) x WHERE pg_visible_in_snapshot(x, k)) "
         "> (SELECT count(DISTINCT o) FROM " + own + " WHERE pg_visible_in_snapshot(o::text::xid8, k) "
         "AND (o::text::xid8 >= pg_snapshot_xmax(h) OR o::text::xid8 IN (SELECT pg_snapshot_xip(h)))) "
         "FROM (SELECT $6::text::pg_snapshot AS h, pg_current_snapshot() AS k) snapshots)))";
}

}  // namespace

// messages_ready_idx: pending AND due_at <= created_at, walked in id order
// from just above $3, where the caller's current pass over the backlog stands.
// $5 is the largest payload read inline. The statement has two branches, of
// which late_commits_possible() runs one: without a late commit possible the
// rows are read and flagged only when they wait behind a due timeout; with
// one, they are read once (`c`) and flagged too when their session has a
// late commit below the cursor. The last column says which branch ran, so
// that the caller can move its horizon on. There is no ORDER BY over the two
// branches: sorting the claim's rows again took a seventh of the claim's
// time (0.7 ms of 5 at 1,000 rows); each branch reads them in id order, and
// the caller takes them in id order whatever order they come in.
std::string claim_immediate(const std::string& s, const std::string& t) {
  const std::string rows = "SELECT m.*, " + std::string(kPayload) + " AS payload_bytes FROM " + t +
                           " m WHERE m.status = 'pending' AND m.due_at <= m.created_at AND m.id > $3 AND " +
                           ready(s, t, "$3") + not_known("$4") + " ORDER BY m.id LIMIT $2";
  const std::string possible = late_commits_possible();
  // Appended, not "(" + behind_timeout(t): GCC 12 at -O3 warns (-Wrestrict) about that operator+.
  std::string passed_over("(");
  passed_over.append(behind_timeout(t)).append(" OR ").append(in_late_session()).append(")");
  return "WITH c AS MATERIALIZED (" + rows + "), late AS (" + late_sessions(t) + ") SELECT " +
         columns(s, passed_over, "$5") + ", true FROM c m WHERE " + possible + " UNION ALL SELECT " +
         columns(s, behind_timeout(t), "$5") + ", false FROM (" + rows + ") m WHERE NOT " + possible;
}

// What a claim needs to know before its statements run: a snapshot taken
// no later than theirs (the pass's horizon, see late_commits_possible()), and
// how many rows the planner's statistics give the outbox $1.
std::string claim_horizon() {
  return "SELECT pg_current_snapshot()::text, "
         "(SELECT c.reltuples FROM pg_class c WHERE c.oid = to_regclass($1))::bigint";
}

// The planner's statistics of the outbox, refreshed by its owner (025).
std::string refresh_statistics(const std::string& schema) { return "SELECT " + schema + ".refresh_statistics()"; }

// messages_scheduled_idx: pending AND due_at > created_at, walked in (due_at, id)
// order from the oldest due time, so a backlog of overdue timeouts costs one
// short index range per claim. SKIP LOCKED for this statement only: cancel()
// either wins completely or returns false. $4 is the largest payload read inline.
std::string claim_scheduled(const std::string& s, const std::string& t) {
  return bounded_claim(columns(s, "false", "$4"), t,
                       "m.status = 'pending' AND m.due_at > m.created_at AND m.due_at <= now() AND " + ready(s, t) +
                           not_known("$3") + " AND NOT " + behind_timeout(t),
                       "m.due_at, m.id", " LIMIT $2 FOR UPDATE OF m SKIP LOCKED");
}

namespace {

// An immediate pending row, as messages_lane_idx holds it.
std::string in_lane(const char* alias) {
  const std::string a(alias);
  return a + ".status = 'pending' AND " + a + ".due_at <= " + a + ".created_at";
}

}  // namespace

// messages_lane_idx: the destinations with immediate pending rows, in name
// order from just after $6 (a recursive walk, one index descent each, at most
// 1,000 steps), leaving out those in $5 (the backlog the id-order pass reads);
// of each, its first $7 claimable rows in id order. At most $2 rows, in lane
// order: the walk stops as soon as they are found. $4 is the largest payload
// read inline.
//
// A step never descends into a backlog destination: it looks only below the
// next one (`skip`), and when nothing is there it steps onto that destination
// by name and on past it. The head of a draining backlog is thousands of index
// entries of rows already deleted and not yet vacuumed; a descent that landed
// there walked them all on every claim.
std::string claim_lanes(const std::string& s, const std::string& t) {
  const std::string after = "SELECT r.destination FROM " + t + " r WHERE " + in_lane("r") +
                            " AND r.destination > lane.destination";
  return "WITH RECURSIVE lane(destination, n) AS (SELECT $6::text, 0 "
         "UNION ALL SELECT coalesce((" + after + " AND r.destination < skip.d ORDER BY r.destination LIMIT 1), "
         "skip.d, (" + after + " ORDER BY r.destination LIMIT 1)), lane.n + 1 "
         "FROM lane CROSS JOIN LATERAL (SELECT min(b) AS d FROM unnest($5::text[]) b WHERE b > lane.destination) skip "
         "WHERE lane.destination IS NOT NULL AND lane.n < 1000) "
         "SELECT " + columns(s, "false", "$4") + " FROM lane CROSS JOIN LATERAL ("
         "SELECT m.*, " + std::string(kPayload) + " AS payload_bytes FROM " + t + " m "
         "WHERE m.destination >= lane.destination AND m.destination <= lane.destination AND " + in_lane("m") + " AND " + ready(s, t) + not_known("$3") +
         " AND NOT " + behind_timeout(t) + " AND " + session_in_order(t) + " ORDER BY m.destination, m.id LIMIT $7) m "
         "WHERE lane.n > 0 AND lane.destination IS NOT NULL AND lane.destination <> ALL($5::text[]) LIMIT $2";
}

// The rows $1 (ids in the claim's order) that are still pending, in that
// order, with body and headers while the payload of the rows before them is
// below the budget $2: the first row always, the rest once the budget is
// reached without. Window w orders them as $1 does. Only rows the claim
// returned without their payload come here, which is rare (large rows).
std::string payloads(const std::string& t) {
  const std::string past_budget = "(coalesce(sum(" + std::string(kPayload) + ") OVER w, 0) >= $2::bigint)";
  return "SELECT m.id, CASE WHEN " + past_budget + " THEN NULL ELSE m.headers::text END, CASE WHEN " + past_budget +
         " THEN NULL ELSE m.body END FROM unnest($1::bigint[]) WITH ORDINALITY AS k(id, n) JOIN " + t +
         " m ON m.id = k.id WHERE m.status = 'pending' "
         "WINDOW w AS (ORDER BY k.n ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) ORDER BY k.n";
}

namespace {

// A write of the daemon's own: how many rows it changed, and its
// transaction's id if it took one (NULL when it changed nothing), which the
// next immediate claim is told is not a writer's (late_commits_possible()).
std::string own_write(const std::string& statement) {
  return "WITH w AS (" + statement + " RETURNING 1) SELECT count(*), pg_current_xact_id_if_assigned()::text::bigint "
         "FROM w";
}

}  // namespace

std::string mark_dispatched(const std::string& t, const std::string& leases) {
  return own_write("UPDATE " + t + " SET status = 'dispatched', dispatched_at = now(), next_attempt_at = NULL "
                   "WHERE id = ANY($1::bigint[]) AND status = 'pending'" + fence(leases, "partition", "$2"));
}

// A security definer (028_dispatcher_locks.sql), which deletes as this
// statement's DELETE did, behind the same fence: DELETE on the table would
// let the dispatcher lock it. The function runs first, in the FROM list, so
// the transaction id is read after its delete.
std::string delete_dispatched(const std::string& schema) {
  return "SELECT d.n, pg_current_xact_id_if_assigned()::text::bigint FROM " + schema +
         ".delete_accepted($1::bigint[], $2) AS d(n)";
}

std::string record_failures(const std::string& t, const std::string& leases) {
  return own_write("UPDATE " + t + " m SET "
                   "status = CASE WHEN f.park THEN 'parked' ELSE m.status END, "
                   "attempts = f.attempts, "
                   "next_attempt_at = CASE WHEN f.park THEN NULL ELSE now() + f.retry_ms * interval '1 millisecond' END, "
                   "last_error = f.error, "
                   "first_failed_at = coalesce(m.first_failed_at, now()), last_failed_at = now() "
                   "FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::text[], $5::boolean[]) "
                   "AS f(id, attempts, retry_ms, error, park) "
                   "WHERE m.id = f.id AND m.status = 'pending'" + fence(leases, "m.partition", "$6"));
}

// Only future events count: a due row blocked in its session must not make
// the daemon spin. Backoffs use messages_blocked_idx, schedules messages_scheduled_idx.
// The run loop's form (within its partitions, every claim) takes min(due_at),
// measured cheapest on a drain; the watcher's (every partition, a dormant
// outbox, a generic plan possibly made while the outbox was empty) the first
// due_at in index order, which a plan made on an empty outbox cannot turn
// into a read of all of messages_due_session_idx.
std::string next_due_ms(const std::string& t, const char* partitions) {
  const std::string scheduled = "FROM " + t + " s WHERE s.status = 'pending' AND s.due_at > s.created_at "
                                "AND s.due_at > now()";
  const std::string first_scheduled =
      partitions == nullptr ? "(SELECT s.due_at " + scheduled + " ORDER BY s.due_at LIMIT 1)"
                            : "(SELECT min(s.due_at) " + scheduled + " AND s.partition = ANY(" + partitions + "))";
  const std::string in_partitions =
      partitions == nullptr ? std::string() : std::string(" AND r.partition = ANY(") + partitions + ")";
  return "ceil(extract(epoch FROM least(" + first_scheduled + ", "
         "(SELECT min(r.next_attempt_at) FROM " + t + " r WHERE r.status = 'pending' "
         "AND r.next_attempt_at > now()" + in_partitions + ")"
         ") - now()) * 1000)::bigint";
}

std::string time_to_next_due(const std::string& t) { return std::string("SELECT ") + next_due_ms(t, "$1::int[]"); }

// Security definers (028_dispatcher_locks.sql): messages_finished_idx, oldest
// first; SKIP LOCKED keeps two purgers apart.
std::string purge(const std::string& schema) {
  return "SELECT " + schema + ".purge_dispatched($1::bigint * interval '1 millisecond', $2)";
}

std::string purge_cancelled(const std::string& schema) {
  return "SELECT " + schema + ".purge_cancelled($1::bigint * interval '1 millisecond', $2)";
}

// A security definer (014_operations.sql): the dispatcher may not delete the trail itself.
std::string purge_events(const std::string& schema) {
  return "SELECT " + schema + ".purge_row_events($1::bigint * interval '1 millisecond', $2)";
}

std::string wakeup_channel(const std::string& schema) { return schema + "_wakeup"; }

std::string set_idle(const std::string& instances) {
  return "INSERT INTO " + instances + " (instance_id, idle, heartbeat_at) VALUES ($1, $2, now()) "
         "ON CONFLICT (instance_id) DO UPDATE SET idle = EXCLUDED.idle, heartbeat_at = now()";
}

// Transactions in progress now, from the lock each holds on its own id: every
// transaction of this database holds one on its virtual id from its start,
// and a prepared one (two-phase commit) on its transaction id until COMMIT
// PREPARED. Virtual ids, not only transaction ids: a writer that has not
// written yet has none, and may still insert without NOTIFY (a REPEATABLE
// READ snapshot older than the arming shows no idle instance). Not
// pg_snapshot_xip(): a snapshot leaves out transactions newer than the latest
// completed one, the writers that matter here. pg_locks and the datname of
// pg_stat_activity need no privilege. The caller's own statement is left out.
std::string open_transactions() {
  return "SELECT l.transactionid::text FROM pg_locks l "
         "WHERE l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock' AND l.granted "
         "UNION ALL "
         "SELECT l.virtualxid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
         "WHERE l.locktype = 'virtualxid' AND l.mode = 'ExclusiveLock' AND l.granted "
         "AND a.datname = current_database() AND l.pid <> pg_backend_pid()";
}

// Those of $1 still in progress.
std::string still_open() {
  return "SELECT x FROM unnest($1::text[]) x WHERE x IN (" + open_transactions() + ")";
}

// The primary's WAL position and standby $1's flushed one (NULL: any), as byte offsets.
std::string standby_position(const std::string& function) {
  return "SELECT (wal_position - '0/0')::bigint, (flushed - '0/0')::bigint FROM " + function + "($1)";
}

}  // namespace outboxd::pg::outbox_sql
