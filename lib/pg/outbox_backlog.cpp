// The backlog figures of /metrics: two statements of index lookups on the partial indexes of 015_backlog_index.sql.
#include <algorithm>

#include "pg/outbox_sql.hpp"
#include "pg/outbox_store.hpp"
#include "pg/text_codec.hpp"

namespace outboxd::pg {
namespace outbox_sql {
namespace {

// The rows of messages_waiting_idx, messages_retrying_idx and messages_parked_idx.
constexpr const char* kWaiting = "m.status = 'pending' AND m.next_attempt_at IS NULL";
constexpr const char* kRetrying = "m.status = 'pending' AND m.next_attempt_at IS NOT NULL";
constexpr const char* kParked = "m.status = 'parked'";
const std::string kDueRows = std::string(kWaiting) + " AND m.due_at <= now()";
const std::string kScheduledRows = std::string(kWaiting) + " AND m.due_at > now()";

// The partitions a figure covers: those leased ($1), or every one (`every`).
constexpr const char* kLeased = "unnest($1::int[]) p";
constexpr const char* kEvery = "every e(p)";

// Destinations with such rows, in name order, one index descent each (a skip
// scan): every one, or with `first_only` the first $3 + 1, which tells
// whether more than $3 have rows at a cost that does not grow with them.
std::string destinations(const std::string& name, const std::string& t, const char* rows, bool first_only = false) {
  return name + "(d, n) AS (SELECT min(m.destination), 1 FROM " + t + " m WHERE " + rows +
         " UNION ALL SELECT (SELECT min(m.destination) FROM " + t + " m WHERE " + rows +
         " AND m.destination > w.d), w.n + 1 FROM " + name + " w WHERE w.d IS NOT NULL" +
         (first_only ? " AND w.n <= $3)" : ")");
}

// The destinations of the three walks, each once.
std::string found(const std::string& t, bool first_only) {
  return destinations("waiting", t, kWaiting, first_only) + ", " + destinations("retrying", t, kRetrying, first_only) +
         ", " + destinations("parked", t, kParked, first_only) +
         ", found AS (SELECT d FROM waiting WHERE d IS NOT NULL UNION SELECT d FROM retrying WHERE d IS NOT NULL "
         "UNION SELECT d FROM parked WHERE d IS NOT NULL)";
}

// The rows of destination x.d in one partition p, per partition so that
// each is one range of the index whatever the other partitions hold.
std::string in_partition(const std::string& t, const std::string& rows, const char* column, const char* partitions) {
  return std::string(partitions) + ", LATERAL (SELECT " + column + " FROM " + t +
         " m WHERE m.destination = x.d AND m.partition = p AND " + rows;
}

// Counting stops at $2 rows: the outer LIMIT ends the loop over partitions too.
std::string capped_count(const std::string& t, const std::string& rows, const char* partitions = kLeased) {
  return "(SELECT count(*) FROM (SELECT FROM " + in_partition(t, rows, "", partitions) + " LIMIT $2) r LIMIT $2) c)";
}

// The earliest due_at: one descent per partition.
std::string first_due(const std::string& t, const std::string& rows, const char* partitions = kLeased) {
  return "(SELECT min(o.due_at) FROM " + in_partition(t, rows, "m.due_at", partitions) +
         " ORDER BY m.due_at LIMIT 1) o)";
}

// The first $2 rows of destination x.d in any partition: one range of the index.
std::string first_rows(const std::string& t, const char* rows, const char* column) {
  return std::string("(SELECT ") + column + " FROM " + t + " m WHERE m.destination = x.d AND " + rows + " LIMIT $2)";
}

std::string milliseconds(const std::string& interval) {
  return "(extract(epoch FROM " + interval + ") * 1000)::bigint";
}

// The figures of each destination x.d listed, in the leased partitions:
// destination, due, scheduled, retrying, parked, oldest due (ms ago), next scheduled (ms ahead).
std::string figures(const std::string& t) {
  return "SELECT x.d, " + capped_count(t, kDueRows) + ", " + capped_count(t, kScheduledRows) + ", " +
         capped_count(t, kRetrying) + ", " + capped_count(t, kParked) + ", " +
         milliseconds("now() - " + first_due(t, kDueRows)) + ", " +
         milliseconds(first_due(t, kScheduledRows) + " - now()");
}

// What a destination is ranked by, over every partition, so that every
// instance lists the same destinations and sums across instances hold.
// A destination costs a descent and at most $2 entries per index it is in.
// Its due rows and oldest due row come from those entries while it has
// fewer than $2 waiting rows, for then they are all of them; past that, from
// a descent per partition, as for the series: the first $2 entries in index
// order may be the scheduled rows of the first partitions. (A lower cap for
// ranking alone would send many more destinations down that path.)
std::string rank_figures(const std::string& s, const std::string& t) {
  const std::string read = "(SELECT count(*) AS n, count(*) FILTER (WHERE r.due_at <= now()) AS due, "
                           "min(r.due_at) FILTER (WHERE r.due_at <= now()) AS oldest FROM " +
                           first_rows(t, kWaiting, "m.due_at") + " r) w";
  return "every(p) AS (SELECT generate_series(0, st.partition_count - 1) FROM " + s + ".settings st), "
         "waiting_rank AS (SELECT x.d, w.n, "
         "CASE WHEN w.n < $2 THEN w.due ELSE " + capped_count(t, kDueRows, kEvery) + " END AS due, "
         "CASE WHEN w.n < $2 THEN w.oldest ELSE " + first_due(t, kDueRows, kEvery) + " END AS oldest "
         "FROM waiting x, LATERAL " + read + " WHERE x.d IS NOT NULL), "
         "retrying_rank AS (SELECT x.d, (SELECT count(*) FROM " + first_rows(t, kRetrying, "") +
         " r) AS n FROM retrying x WHERE x.d IS NOT NULL), "
         "parked_rank AS (SELECT x.d, (SELECT count(*) FROM " + first_rows(t, kParked, "") +
         " r) AS n FROM parked x WHERE x.d IS NOT NULL), "
         "ranked AS (SELECT d, coalesce(w.due, 0) + coalesce(r.n, 0) + coalesce(k.n, 0) AS owed, w.oldest, "
         "coalesce(w.n, 0) AS waiting_rows FROM waiting_rank w FULL JOIN retrying_rank r USING (d) "
         "FULL JOIN parked_rank k USING (d))";
}

// The destinations given series: every one while there are at most $3; the
// ranking then costs nothing (a one-time filter: its figures are not read).
// Beyond $3, the rule: first the rows a destination owes (due, retrying,
// parked), for they are what the lag and parked-row alerts watch; then its
// oldest due row, which separates the many destinations of a row or two and
// those at the cap; then, among those owing nothing, the larger; the name
// only last. Writers choose the names, so a name sorting first must not push
// out a destination with a real backlog: only destinations owing more rows,
// or as many and older, do.
std::string listed() {
  return "listed AS (SELECT d FROM found WHERE (SELECT count(*) FROM found) <= $3 "
         "UNION ALL (SELECT d FROM ranked WHERE (SELECT count(*) FROM found) > $3 "
         "ORDER BY owed DESC, oldest, waiting_rows DESC, d LIMIT $3))";
}

}  // namespace

std::string backlog(const std::string& s, const std::string& t) {
  return "WITH RECURSIVE " + found(t, false) + ", " + rank_figures(s, t) + ", " + listed() + " " + figures(t) +
         ", greatest(0, (SELECT count(*) FROM found) - $3) FROM listed x ORDER BY x.d";
}

// The destinations in $4 (those a ranking chose), unless no more than $3
// have rows: then every one, as backlog() lists them then. Either way at most
// $3 + 1 descents per index to tell, and the figures of $3 destinations: the
// cost of backlog() with $3 destinations or fewer, whatever the number beyond.
// The last column says whether more than $3 have rows; those left out are not
// counted, for that needs the walk over every destination.
std::string backlog_of(const std::string& t) {
  const std::string beyond = "(SELECT count(*) FROM found) > $3";
  return "WITH RECURSIVE " + found(t, true) + ", listed AS (SELECT d FROM found WHERE NOT " + beyond +
         " UNION ALL SELECT d FROM unnest($4::text[]) c(d) WHERE " + beyond + ") " + figures(t) + ", " + beyond +
         " FROM listed x ORDER BY x.d";
}

}  // namespace outbox_sql

namespace {

double seconds(std::int64_t ms) { return static_cast<double>(ms) / 1000.0; }

DestinationBacklog destination_at(const Rows& rows, int r) {
  DestinationBacklog d;
  d.destination = std::string(rows.text(r, 0));
  d.due = rows.int64(r, 1);
  d.scheduled = rows.int64(r, 2);
  d.retrying = rows.int64(r, 3);
  d.parked = rows.int64(r, 4);
  if (auto age = rows.optional_int64(r, 5)) d.oldest_due_age = seconds(std::max<std::int64_t>(0, *age));
  if (auto next = rows.optional_int64(r, 6)) d.next_due_in = seconds(std::max<std::int64_t>(0, *next));
  return d;
}

}  // namespace

core::Result<BacklogReport> OutboxStore::backlog(const std::vector<int>& partitions, int count_cap,
                                                 int max_destinations) {
  BacklogReport report;
  if (partitions.empty() || max_destinations <= 0) return report;
  auto rows = run("backlog", {int_array_literal(partitions), std::to_string(count_cap),
                              std::to_string(max_destinations)});
  if (!rows) return core::Error{rows.error().kind, "measuring the backlog: " + rows.error().message};
  const Rows& r = rows.value();
  for (int i = 0; i < r.size(); ++i) report.destinations.push_back(destination_at(r, i));
  report.left_out = r.size() > 0 ? r.int64(0, 7) : 0;
  report.beyond_bound = report.left_out > 0;
  return report;
}

core::Result<BacklogReport> OutboxStore::backlog_of(const std::vector<int>& partitions, int count_cap,
                                                    int max_destinations,
                                                    const std::vector<std::string>& destinations) {
  BacklogReport report;
  if (partitions.empty() || max_destinations <= 0) return report;
  auto rows = run("backlog_of", {int_array_literal(partitions), std::to_string(count_cap),
                                 std::to_string(max_destinations), text_array_literal(destinations)});
  if (!rows) return core::Error{rows.error().kind, "measuring the backlog: " + rows.error().message};
  const Rows& r = rows.value();
  for (int i = 0; i < r.size(); ++i) report.destinations.push_back(destination_at(r, i));
  report.beyond_bound = r.size() > 0 && r.boolean(0, 7);
  return report;
}

}  // namespace outboxd::pg
