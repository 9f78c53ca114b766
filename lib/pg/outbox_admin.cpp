// The CLI's statements on the outbox: status counts and fire of scheduled rows (requeue, skip: operator_actions.cpp).
#include "pg/outbox_store.hpp"
#include "pg/text_codec.hpp"

namespace outboxd::pg {
namespace {

core::Error in_context(const char* context, const core::Error& error) {
  return {error.kind, std::string(context) + ": " + error.message};
}

// Due = pending, due_at reached, not backing off; its age counts from due_at.
std::string status_sql(const std::string& table) {
  return "SELECT destination, "
         "count(*) FILTER (WHERE status = 'pending'), "
         "count(*) FILTER (WHERE status = 'pending' AND due_at <= now() "
         "  AND (next_attempt_at IS NULL OR next_attempt_at <= now())), "
         "count(*) FILTER (WHERE status = 'pending' AND due_at > now()), "
         "count(*) FILTER (WHERE status = 'pending' AND next_attempt_at > now()), "
         "count(*) FILTER (WHERE status = 'parked'), "
         "(extract(epoch FROM now() - min(due_at) FILTER (WHERE status = 'pending' AND due_at <= now() "
         "  AND (next_attempt_at IS NULL OR next_attempt_at <= now()))) * 1000)::bigint "
         "FROM " + table + " WHERE status IN ('pending', 'parked') "
         "GROUP BY destination ORDER BY destination";
}

void add(DestinationStatus& total, const DestinationStatus& part) {
  total.pending += part.pending;
  total.due += part.due;
  total.scheduled += part.scheduled;
  total.retrying += part.retrying;
  total.parked += part.parked;
  if (part.oldest_pending_age && (!total.oldest_pending_age || *part.oldest_pending_age > *total.oldest_pending_age)) {
    total.oldest_pending_age = part.oldest_pending_age;
  }
}

}  // namespace

core::Result<StatusReport> OutboxStore::status() {
  auto rows = connection_.exec(status_sql(table_));
  if (!rows) return in_context("counting outbox rows", rows.error());
  StatusReport report;
  const Rows& r = rows.value();
  for (int i = 0; i < r.size(); ++i) {
    DestinationStatus d;
    d.destination = std::string(r.text(i, 0));
    d.pending = r.int64(i, 1);
    d.due = r.int64(i, 2);
    d.scheduled = r.int64(i, 3);
    d.retrying = r.int64(i, 4);
    d.parked = r.int64(i, 5);
    if (auto age = r.optional_int64(i, 6)) d.oldest_pending_age = std::chrono::milliseconds(*age);
    add(report.total, d);
    report.destinations.push_back(std::move(d));
  }
  return report;
}

core::Status OutboxStore::notify() {
  auto notified = connection_.exec_params("SELECT pg_notify($1, '')", {channel_});
  if (!notified) return in_context("notifying dispatchers", notified.error());
  return {};
}

// A security definer (022_row_trail.sql) writes each row's fired event: the
// dispatcher may not set due_at itself. Empty names match nothing.
core::Result<FireReport> OutboxStore::fire(std::string_view message_id, std::string_view session_id,
                                           std::string_view os_user, std::string_view writer) {
  auto fired = connection_.exec_params("SELECT count(*), session_user::text, now()::text FROM " +
                                           quote_ident(schema_) + ".fire_scheduled($1, $2, $3, $4)",
                                       {std::string(message_id), std::string(session_id), unless_empty(os_user),
                                        unless_empty(writer)});
  if (!fired) return in_context("firing scheduled rows", fired.error());
  const Rows& rows = fired.value();
  FireReport report;
  report.rows = static_cast<int>(rows.int64(0, 0));
  if (report.rows == 0) return report;
  report.by = std::string(rows.text(0, 1));
  report.at = std::string(rows.text(0, 2));
  if (auto notified = notify(); !notified) return notified.error();
  return report;
}

}  // namespace outboxd::pg
