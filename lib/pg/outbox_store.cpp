// Claim, mark, back off, park, purge: the dispatch loop's prepared statements.
#include "pg/outbox_store.hpp"

#include <algorithm>
#include <limits>

#include "core/safe_text.hpp"
#include "pg/outbox_sql.hpp"
#include "pg/text_codec.hpp"

namespace outboxd::pg {
namespace {

namespace sql = outbox_sql;

constexpr std::size_t kMaxErrorBytes = 1000;

// The single bigint of time_to_next_due: milliseconds, or NULL for nothing waiting.
std::optional<std::chrono::milliseconds> wait_of(const Rows& rows) {
  const auto ms = rows.optional_int64(0, 0);
  if (!ms) return std::nullopt;
  return std::chrono::milliseconds(std::max<std::int64_t>(0, *ms));
}

core::Error in_context(const char* context, const core::Error& error) {
  return {error.kind, std::string(context) + ": " + error.message};
}

core::Status status_of(const core::Result<Rows>& rows, const char* context) {
  if (!rows) return in_context(context, rows.error());
  return {};
}

core::Result<int> changed(const core::Result<Rows>& rows, const char* context) {
  if (!rows) return in_context(context, rows.error());
  return static_cast<int>(rows.value().affected());
}

using std::chrono::microseconds;
using std::chrono::system_clock;

system_clock::time_point from_epoch_us(std::int64_t us) { return system_clock::time_point(microseconds(us)); }

// A claim's rows, less those held back behind a due timeout of their
// session, which go to `held_back` (id and session).
std::vector<core::OutboxMessage> decode(const Rows& rows,
                                        std::vector<std::pair<core::RowId, std::string>>& held_back) {
  std::vector<core::OutboxMessage> out;
  out.reserve(static_cast<std::size_t>(rows.size()));
  for (int r = 0; r < rows.size(); ++r) {
    if (rows.boolean(r, sql::kHeldBack)) {
      held_back.emplace_back(rows.int64(r, sql::kId), std::string(rows.text(r, sql::kSessionId)));
      continue;
    }
    core::OutboxMessage m;
    m.id = rows.int64(r, sql::kId);
    m.message_id = std::string(rows.text(r, sql::kMessageId));
    m.destination = std::string(rows.text(r, sql::kDestination));
    m.session_id = rows.optional_text(r, sql::kSessionId);
    m.correlation_id = rows.optional_text(r, sql::kCorrelationId);
    m.parent_message_id = rows.optional_text(r, sql::kParentMessageId);
    m.originating_message_id = rows.optional_text(r, sql::kOriginatingMessageId);
    m.subject = rows.optional_text(r, sql::kSubject);
    m.content_type = rows.optional_text(r, sql::kContentType);
    m.traceparent = rows.optional_text(r, sql::kTraceparent);
    m.headers_json = std::string(rows.text(r, sql::kHeaders));
    m.body = std::string(rows.text(r, sql::kBody));
    if (auto ttl = rows.optional_int64(r, sql::kTtlMs)) m.ttl = std::chrono::milliseconds(*ttl);
    m.created_at = from_epoch_us(rows.int64(r, sql::kCreatedUs));
    // due_at only for scheduled rows: for immediate ones it says nothing.
    if (rows.boolean(r, sql::kScheduled)) m.due_at = from_epoch_us(rows.int64(r, sql::kDueUs));
    m.attempts = static_cast<int>(rows.int64(r, sql::kAttempts));
    m.partition = static_cast<int>(rows.int64(r, sql::kPartition));
    // A clock step on the server can make it negative: then it says nothing.
    m.due_for = microseconds(std::max<std::int64_t>(0, rows.int64(r, sql::kDueForUs)));
    out.push_back(std::move(m));
  }
  return out;
}

// Whatever produced the error, PostgreSQL refuses invalid UTF-8 (22021) and
// the same failing write would be retried forever; safe_text repairs it.
std::string bounded(std::string_view text) { return core::safe_text(text, kMaxErrorBytes); }

}  // namespace

OutboxStore::OutboxStore(Connection& connection, std::string schema)
    : connection_(connection),
      schema_(std::move(schema)),
      table_(quote_ident(schema_) + ".messages"),
      channel_(schema_ + "_wakeup"),
      prefix_("outboxd." + schema_ + ".") {
  const std::string leases = quote_ident(schema_) + ".leases";
  statements_ = {
      {prefix_ + "claim_immediate", sql::claim_immediate(table_)},
      {prefix_ + "claim_scheduled", sql::claim_scheduled(table_)},
      {prefix_ + "mark_dispatched", sql::mark_dispatched(table_, leases)},
      {prefix_ + "delete_dispatched", sql::delete_dispatched(table_, leases)},
      {prefix_ + "record_failures", sql::record_failures(table_, leases)},
      {prefix_ + "time_to_next_due", sql::time_to_next_due(table_)},
      {prefix_ + "purge", sql::purge(table_)},
      {prefix_ + "set_idle", sql::set_idle(quote_ident(schema_) + ".instances")},
      {prefix_ + "open_transactions", sql::open_transactions()},
      {prefix_ + "still_open", sql::still_open()},
  };
  for (const auto& [name, text] : statements_) connection_.define(name, text);
}

core::Status OutboxStore::prepare() {
  for (const auto& [name, text] : statements_) {
    if (auto prepared = connection_.prepare(name, text); !prepared) return prepared;
  }
  return {};
}

core::Result<Rows> OutboxStore::run(std::string_view name, const Params& params, ResultFormat format) {
  return connection_.exec_prepared(prefix_ + std::string(name), params, format);
}

core::Result<OutboxStore::Claim> OutboxStore::claim(const std::vector<int>& partitions, int limit,
                                                   core::RowId after_id, std::span<const core::RowId> known) {
  if (partitions.empty() || limit <= 0) return Claim{};
  const std::string set = int_array_literal(partitions);
  const std::string count = std::to_string(limit);
  const std::string known_ids = int_array_literal(known);
  const std::string immediate_name = prefix_ + "claim_immediate";
  const std::string scheduled_name = prefix_ + "claim_scheduled";
  const std::string next_due_name = prefix_ + "time_to_next_due";
  // Binary format for the rows: bodies arrive as their bytes, not as hex text
  // twice their size that the server encodes and we decode (a sixth of the
  // daemon's instructions per row when measured).
  auto results = connection_.exec_prepared_pipeline(
      {{immediate_name, {set, count, std::to_string(after_id), known_ids}, ResultFormat::binary},
       {scheduled_name, {set, count, known_ids}, ResultFormat::binary},
       {next_due_name, {set}}});
  if (!results) return in_context("claiming rows", results.error());
  const Rows& immediate_rows = results.value()[0];
  const Rows& scheduled_rows = results.value()[1];

  // A full immediate batch may have left out rows above its last id; a
  // scheduled row above that id waits for the next claim too, so that no
  // session sees a higher id before a lower one. Fullness and the cursor
  // count the rows held back too: the pass moves past them (they are found
  // again by the next pass or the next claim after their timeout is marked).
  Claim claim;
  claim.next_due = wait_of(results.value()[2]);
  core::RowId cut = std::numeric_limits<core::RowId>::max();
  if (immediate_rows.size() > 0) claim.last_immediate_id = immediate_rows.int64(immediate_rows.size() - 1, sql::kId);
  if (immediate_rows.size() == limit) {
    cut = claim.last_immediate_id;
    claim.immediate_full = true;
  }
  claim.scheduled_full = scheduled_rows.size() == limit;
  auto immediate = decode(immediate_rows, claim.held_back);
  auto scheduled = decode(scheduled_rows, claim.held_back);
  auto by_id = [](const core::OutboxMessage& a, const core::OutboxMessage& b) { return a.id < b.id; };
  std::sort(scheduled.begin(), scheduled.end(), by_id);
  auto& merged = claim.rows;
  merged.reserve(immediate.size() + scheduled.size());
  std::merge(std::make_move_iterator(immediate.begin()), std::make_move_iterator(immediate.end()),
             std::make_move_iterator(scheduled.begin()), std::make_move_iterator(scheduled.end()),
             std::back_inserter(merged), by_id);
  merged.erase(std::find_if(merged.begin(), merged.end(), [cut](const core::OutboxMessage& m) { return m.id > cut; }),
               merged.end());
  return claim;
}

core::Result<int> OutboxStore::mark_dispatched(const std::vector<core::RowId>& ids, config::RetentionMode mode,
                                               std::string_view owner) {
  if (ids.empty()) return 0;
  const char* statement = mode == config::RetentionMode::keep ? "mark_dispatched" : "delete_dispatched";
  return changed(run(statement, {int_array_literal(ids), std::string(owner)}), "marking rows dispatched");
}

core::Result<int> OutboxStore::record_failures(const std::vector<FailureRecord>& failures, std::string_view owner) {
  if (failures.empty()) return 0;
  std::vector<std::int64_t> ids;
  std::vector<int> attempts;
  std::vector<std::int64_t> retry_ms;
  std::vector<std::string> errors;
  std::vector<bool> park;
  for (const FailureRecord& failure : failures) {
    ids.push_back(failure.id);
    attempts.push_back(failure.attempts);
    retry_ms.push_back(std::max<std::int64_t>(0, failure.retry_in.count()));
    errors.push_back(bounded(failure.error));
    park.push_back(failure.park);
  }
  return changed(run("record_failures", {int_array_literal(ids), int_array_literal(attempts),
                                           int_array_literal(retry_ms), text_array_literal(errors),
                                           bool_array_literal(park), std::string(owner)}),
                   "recording failed deliveries");
}

core::Result<std::optional<std::chrono::milliseconds>> OutboxStore::time_to_next_due(
    const std::vector<int>& partitions) {
  using Wait = std::optional<std::chrono::milliseconds>;
  if (partitions.empty()) return Wait();
  auto rows = run("time_to_next_due", {int_array_literal(partitions)});
  if (!rows) return in_context("looking for the next due row", rows.error());
  return wait_of(rows.value());
}

core::Result<int> OutboxStore::purge(std::chrono::milliseconds keep_for, int batch) {
  if (batch <= 0) return 0;
  auto rows = run("purge", {std::to_string(keep_for.count()), std::to_string(batch)});
  if (!rows) return in_context("purging finished rows", rows.error());
  return static_cast<int>(rows.value().affected());
}

core::Status OutboxStore::set_idle(std::string_view instance_id, bool idle) {
  return status_of(run("set_idle", {std::string(instance_id), std::string(idle ? "t" : "f")}),
                   "updating this instance's idle flag");
}

namespace {

std::vector<std::string> first_column(const Rows& rows) {
  std::vector<std::string> values;
  values.reserve(static_cast<std::size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) values.emplace_back(rows.text(i, 0));
  return values;
}

}  // namespace

core::Result<std::vector<std::string>> OutboxStore::open_transactions() {
  auto rows = run("open_transactions", {});
  if (!rows) return in_context("listing open transactions", rows.error());
  return first_column(rows.value());
}

core::Result<std::vector<std::string>> OutboxStore::still_open(const std::vector<std::string>& transactions) {
  if (transactions.empty()) return std::vector<std::string>();
  auto rows = run("still_open", {text_array_literal(transactions)});
  if (!rows) return in_context("checking open transactions", rows.error());
  return first_column(rows.value());
}

core::Status OutboxStore::listen() {
  if (auto listening = connection_.listen(channel_); !listening) {
    return in_context("listening for wake-ups", listening.error());
  }
  return {};
}

}  // namespace outboxd::pg
