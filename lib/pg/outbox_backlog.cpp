// The backlog figures of /metrics: one statement of index lookups on the partial indexes of 015_backlog_index.sql.
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

// Destinations in name order, one index descent each (a skip scan), at most $3 + 1.
std::string destinations(const std::string& name, const std::string& t, const char* rows) {
  return name + "(d, n) AS (SELECT min(m.destination), 1 FROM " + t + " m WHERE " + rows +
         " UNION ALL SELECT (SELECT min(m.destination) FROM " + t + " m WHERE " + rows +
         " AND m.destination > w.d), w.n + 1 FROM " + name + " w WHERE w.d IS NOT NULL AND w.n <= $3)";
}

// The rows of destination x.d in one held partition p, per partition so that
// each is one range of the index whatever the other partitions hold.
std::string in_partition(const std::string& t, const std::string& rows, const char* column) {
  return std::string("unnest($1::int[]) p, LATERAL (SELECT ") + column + " FROM " + t +
         " m WHERE m.destination = x.d AND m.partition = p AND " + rows;
}

// Counting stops at $2 rows: the outer LIMIT ends the loop over partitions too.
std::string capped_count(const std::string& t, const std::string& rows) {
  return "(SELECT count(*) FROM (SELECT FROM " + in_partition(t, rows, "") + " LIMIT $2) r LIMIT $2) c)";
}

// The earliest due_at: one descent per partition.
std::string first_due(const std::string& t, const std::string& rows) {
  return "(SELECT min(o.due_at) FROM " + in_partition(t, rows, "m.due_at") + " ORDER BY m.due_at LIMIT 1) o)";
}

std::string milliseconds(const std::string& interval) {
  return "(extract(epoch FROM " + interval + ") * 1000)::bigint";
}

}  // namespace

std::string backlog(const std::string& t) {
  const std::string waiting = kWaiting;
  return "WITH RECURSIVE " + destinations("waiting", t, kWaiting) + ", " + destinations("retrying", t, kRetrying) +
         ", " + destinations("parked", t, kParked) +
         ", found AS (SELECT d FROM waiting UNION SELECT d FROM retrying UNION SELECT d FROM parked "
         "ORDER BY d NULLS LAST LIMIT $3 + 1), "
         "listed AS (SELECT d FROM found WHERE d IS NOT NULL ORDER BY d LIMIT $3) "
         "SELECT x.d, " +
         capped_count(t, waiting + " AND m.due_at <= now()") + ", " +
         capped_count(t, waiting + " AND m.due_at > now()") + ", " + capped_count(t, kRetrying) + ", " +
         capped_count(t, kParked) + ", " +
         milliseconds("now() - " + first_due(t, waiting + " AND m.due_at <= now()")) + ", " +
         milliseconds(first_due(t, waiting + " AND m.due_at > now()") + " - now()") + ", " +
         "(SELECT count(d) > $3 FROM found) FROM listed x ORDER BY x.d";
}

}  // namespace outbox_sql

namespace {

double seconds(std::int64_t ms) { return static_cast<double>(ms) / 1000.0; }

DestinationBacklog backlog_of(const Rows& rows, int r) {
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
  for (int i = 0; i < r.size(); ++i) report.destinations.push_back(backlog_of(r, i));
  report.truncated = r.size() > 0 && r.boolean(0, 7);
  return report;
}

}  // namespace outboxd::pg
