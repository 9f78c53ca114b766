// Claim, mark, back off, park, purge: the dispatch loop's prepared statements.
#include "pg/outbox_store.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <utility>

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

// The order in which a claim statement's rows are taken: the statement's,
// but id order for the immediate claim, whose rows come in that order
// without an ORDER BY (outbox_sql.cpp, claim_immediate): one look confirms
// it, and otherwise they are sorted here.
std::vector<int> claim_order(const Rows& rows, bool by_id) {
  std::vector<int> order(static_cast<std::size_t>(rows.size()));
  std::iota(order.begin(), order.end(), 0);
  const auto lower = [&rows](int a, int b) { return rows.int64(a, sql::kId) < rows.int64(b, sql::kId); };
  if (by_id && !std::is_sorted(order.begin(), order.end(), lower)) std::sort(order.begin(), order.end(), lower);
  return order;
}

// The immediate claim's last column, the same in every row; false for no rows.
bool late_commits_asked(const Rows& rows) {
  return rows.size() > 0 && rows.boolean(0, sql::kLateCommitsAsked);
}

using std::chrono::microseconds;
using std::chrono::system_clock;

// A timestamptz in binary format: microseconds since 2000-01-01 00:00 UTC.
// A claimed row's times are past (it is due), so they fit the clock; the
// bound only keeps the sum defined.
system_clock::time_point from_pg_timestamp(std::int64_t us) {
  constexpr std::int64_t kPgEpochUs = 946'684'800'000'000;  // 2000-01-01 in Unix time
  const auto latest = std::chrono::duration_cast<microseconds>(system_clock::duration::max()).count() - kPgEpochUs;
  return system_clock::time_point(microseconds(std::min(us, latest) + kPgEpochUs));
}

core::OutboxMessage message_of(const Rows& rows, int r) {
  core::OutboxMessage m;
  m.id = rows.int64(r, sql::kId);
  m.message_id = std::string(rows.text(r, sql::kMessageId));
  m.destination = std::string(rows.text(r, sql::kDestination));
  m.session_id = rows.optional_text(r, sql::kSessionId);
  m.writer = rows.optional_text(r, sql::kWriter);
  m.correlation_id = rows.optional_text(r, sql::kCorrelationId);
  m.parent_message_id = rows.optional_text(r, sql::kParentMessageId);
  m.originating_message_id = rows.optional_text(r, sql::kOriginatingMessageId);
  m.subject = rows.optional_text(r, sql::kSubject);
  m.content_type = rows.optional_text(r, sql::kContentType);
  m.traceparent = rows.optional_text(r, sql::kTraceparent);
  if (!rows.is_null(r, sql::kHeaders)) m.headers_json = std::string(rows.text(r, sql::kHeaders));
  m.body = std::string(rows.text(r, sql::kBody));
  if (auto ttl = rows.optional_int64(r, sql::kTtlMs)) m.ttl = std::chrono::milliseconds(*ttl);
  m.created_at = from_pg_timestamp(rows.int64(r, sql::kCreatedAt));
  // due_at only for scheduled rows: for immediate ones it says nothing.
  if (rows.boolean(r, sql::kScheduled)) m.due_at = from_pg_timestamp(rows.int64(r, sql::kDueAt));
  m.attempts = static_cast<int>(rows.int64(r, sql::kAttempts));
  m.partition = static_cast<int>(rows.int64(r, sql::kPartition));
  // A clock step on the server can make it negative: then it says nothing.
  m.due_for = microseconds(std::max<std::int64_t>(0, rows.int64(r, sql::kDueForUs)));
  return m;
}

std::string too_large(std::int64_t payload, std::int64_t max_message) {
  return "message too large: its body and headers take " + std::to_string(payload) + " bytes, over the limit of " +
         std::to_string(max_message) + " bytes (dispatch.max_message_bytes, less " +
         std::to_string(kPropertiesMargin) + " for properties and framing); not sent";
}

// Written before a rule of the DBA's refused it, `setting` the claim's name
// for the rule: the list of plain names (016), so no queue is created for
// it, or the charset (021), so no link is attached to an address the broker
// would close the connection on.
std::string refused(const core::OutboxMessage& row, std::string_view setting) {
  const std::string why = setting == "destination_charset"
                              ? "has characters outside Latin-1 (settings.destination_charset is latin1)"
                              : "is not in settings.allowed_destinations";
  return "destination \"" + row.destination + "\" " + why + "; not sent";
}

// The body and headers of a claimed set's larger rows, read by payloads():
// the rows, and each one's index by id.
struct LargeRows {
  Rows rows;
  std::unordered_map<core::RowId, int> index;
};

// A row that came without body and headers though they fit the largest
// message: its payload is over the inline limit, and payloads() reads it.
bool read_later(const Rows& rows, int r, std::int64_t max_payload) {
  return rows.is_null(r, sql::kBody) && rows.int64(r, sql::kPayloadBytes) <= max_payload &&
         !rows.boolean(r, sql::kPassedOver);
}

// A statement's claimed rows, in its order: the rows, less those passed over
// (behind a due timeout or a late commit of their session), which go to
// `passed_over` (id and session key). A row over the limit comes without body
// and headers: it is returned unsendable. A larger row takes its body and headers from `large`;
// one that payloads() found changed since (no longer pending) is left out,
// and one past the byte budget ends the set: it and the rows after it are
// left for the next claim. The result is taken and freed once decoded:
// libpq's API gives its values only to copy out.
core::ClaimedSet decode(Rows rows, const std::vector<int>& order, std::int64_t max_message, const LargeRows& large) {
  core::ClaimedSet set;
  const std::int64_t max_payload = max_message - kPropertiesMargin;
  set.rows.reserve(static_cast<std::size_t>(rows.size()));
  for (const int r : order) {
    const core::RowId id = rows.int64(r, sql::kId);
    const bool later = read_later(rows, r, max_payload);
    std::optional<int> late;
    if (later) {
      const auto found = large.index.find(id);
      if (found != large.index.end() && large.rows.is_null(found->second, 2)) {
        set.budget_used = true;
        break;
      }
      if (found != large.index.end()) late = found->second;
    }
    ++set.read;
    set.last_id = id;
    if (rows.boolean(r, sql::kPassedOver)) {
      set.passed_over.push_back(
          {id, core::session_key(rows.optional_text(r, sql::kWriter), rows.text(r, sql::kSessionId))});
      continue;
    }
    if (later && !late) continue;  // changed since the claim: not ours to send
    set.rows.push_back(message_of(rows, r));
    core::OutboxMessage& row = set.rows.back();
    if (late) {
      if (!large.rows.is_null(*late, 1)) row.headers_json = std::string(large.rows.text(*late, 1));
      row.body = std::string(large.rows.text(*late, 2));
    } else if (rows.is_null(r, sql::kBody)) {
      row.unsendable = too_large(rows.int64(r, sql::kPayloadBytes), max_message);
    }
    if (!rows.is_null(r, sql::kDestinationRefused)) {
      row.unsendable = refused(row, rows.text(r, sql::kDestinationRefused));
    }
  }
  return set;
}

// The claim's own transaction has ended: a row may have changed since, and
// payloads() reads only those still pending.
// `statement` is the store's prepared payloads().
core::Result<LargeRows> read_large_rows(Connection& connection, const std::string& statement, const Rows& claimed,
                                        const std::vector<int>& order, std::int64_t max_payload, std::int64_t budget) {
  std::vector<core::RowId> ids;
  for (const int r : order) {
    if (read_later(claimed, r, max_payload)) ids.push_back(claimed.int64(r, sql::kId));
  }
  LargeRows large;
  if (ids.empty()) return large;
  auto rows =
      connection.exec_prepared(statement, {int_array_literal(ids), std::to_string(budget)}, ResultFormat::binary);
  if (!rows) return in_context("reading large rows", rows.error());
  large.rows = std::move(rows).value();
  for (int r = 0; r < large.rows.size(); ++r) large.index.emplace(large.rows.int64(r, 0), r);
  return large;
}

// Whatever produced the error, PostgreSQL refuses invalid UTF-8 (22021) and
// the same failing write would be retried forever; safe_text repairs it.
std::string bounded(std::string_view text) { return core::safe_text(text, kMaxErrorBytes); }

}  // namespace

OutboxStore::OutboxStore(Connection& connection, std::string schema)
    : connection_(connection),
      schema_(std::move(schema)),
      table_(quote_ident(schema_) + ".messages"),
      channel_(sql::wakeup_channel(schema_)),
      prefix_("outboxd." + schema_ + "."),
      statements_(statements(schema_)) {
  for (const auto& [name, text] : statements_) connection_.define(name, text);
}

NamedStatements OutboxStore::statements(const std::string& schema) {
  const std::string s = quote_ident(schema);
  const std::string table = s + ".messages";
  const std::string leases = s + ".leases";
  const std::string prefix = "outboxd." + schema + ".";
  return {
      {prefix + "claim_immediate", sql::claim_immediate(s, table)},
      {prefix + "claim_scheduled", sql::claim_scheduled(s, table)},
      {prefix + "claim_lanes", sql::claim_lanes(s, table)},
      {prefix + "claim_horizon", sql::claim_horizon()},
      {prefix + "refresh_statistics", sql::refresh_statistics(s)},
      {prefix + "payloads", sql::payloads(table)},
      {prefix + "mark_dispatched", sql::mark_dispatched(table, leases)},
      {prefix + "delete_dispatched", sql::delete_dispatched(s)},
      {prefix + "record_failures", sql::record_failures(table, leases)},
      {prefix + "time_to_next_due", sql::time_to_next_due(table)},
      {prefix + "purge", sql::purge(s)},
      {prefix + "backlog", sql::backlog(s, table)},
      {prefix + "backlog_of", sql::backlog_of(table)},
      {prefix + "purge_cancelled", sql::purge_cancelled(s)},
      {prefix + "purge_events", sql::purge_events(s)},
      {prefix + "set_idle", sql::set_idle(s + ".instances")},
      {prefix + "open_transactions", sql::open_transactions()},
      {prefix + "still_open", sql::still_open()},
      {prefix + "standby_position", sql::standby_position(s + ".standby_position")},
  };
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

core::Result<core::ClaimedSets> OutboxStore::claim(const std::vector<int>& partitions, int limit,
                                                   core::RowId after_id, std::span<const core::RowId> known,
                                                   const core::ClaimBytes& bytes, const core::LaneRequest& lanes,
                                                   const std::optional<std::string>& horizon) {
  if (partitions.empty() || limit <= 0) return core::ClaimedSets{};
  const std::string set = int_array_literal(partitions);
  const std::string count = std::to_string(limit);
  const std::string known_ids = int_array_literal(known);
  const std::int64_t max_payload = bytes.max_message - kPropertiesMargin;
  // Half the budget is read inline, shared evenly by the rows of a full
  // batch; the larger rows are read within the other half (outbox_sql.hpp).
  const std::int64_t budget = std::max<std::int64_t>(bytes.budget / 2, 1);
  const std::string inline_limit = std::to_string(std::min(max_payload, budget / limit));
  // Binary format for the rows: bodies arrive as their bytes, not as hex text
  // twice their size that the server encodes and we decode (a sixth of the
  // daemon's instructions per row when measured).
  // PreparedCall holds a view of its name.
  // The horizon first: its snapshot must be no later than the claims'.
  const std::string names[] = {prefix_ + "claim_horizon", prefix_ + "claim_immediate", prefix_ + "claim_scheduled",
                               prefix_ + "time_to_next_due", prefix_ + "claim_lanes"};
  const Connection::PreparedCall lanes_call{names[4],
                                            {set, std::to_string(lanes.limit), known_ids, inline_limit,
                                             text_array_literal(lanes.skip), lanes.after,
                                             std::to_string(lanes.per_lane)},
                                            ResultFormat::binary};
  if (lanes.alone) return claim_lanes_alone(lanes_call, bytes, max_payload, budget);
  std::vector<Connection::PreparedCall> statements{
      {names[0], {table_}},
      {names[1],
       {set, lanes.only ? "0" : count, std::to_string(after_id), known_ids, inline_limit, horizon,
        int_array_literal(connection_.take_own_transactions())},
       ResultFormat::binary},
      {names[2], {set, count, known_ids, inline_limit}, ResultFormat::binary},
      {names[3], {set}}};
  if (lanes.limit > 0) statements.push_back(lanes_call);
  auto results = connection_.exec_prepared_pipeline(statements);
  if (!results) return in_context("claiming rows", results.error());
  core::ClaimedSets sets;
  const Rows& seen = results.value()[0];
  sets.horizon = std::string(seen.text(0, 0));
  sets.table_rows = seen.optional_int64(0, 1);
  sets.late_commits_asked = late_commits_asked(results.value()[1]);
  const std::string payloads = prefix_ + "payloads";
  for (const auto& [index, set_of] : {std::pair{1, &core::ClaimedSets::immediate},
                                      std::pair{2, &core::ClaimedSets::scheduled},
                                      std::pair{4, &core::ClaimedSets::lanes}}) {
    if (static_cast<std::size_t>(index) >= results.value().size()) break;
    const auto order = claim_order(results.value()[index], set_of == &core::ClaimedSets::immediate);
    auto large = read_large_rows(connection_, payloads, results.value()[index], order, max_payload, budget);
    if (!large) return large.error();
    sets.*set_of = decode(std::move(results.value()[index]), order, bytes.max_message, large.value());
  }
  sets.next_due = wait_of(results.value()[3]);
  return sets;
}

core::Result<core::ClaimedSets> OutboxStore::claim_lanes_alone(const Connection::PreparedCall& call,
                                                               const core::ClaimBytes& bytes, std::int64_t max_payload,
                                                               std::int64_t budget) {
  auto results = connection_.exec_prepared_pipeline({call});
  if (!results) return in_context("claiming rows by destination", results.error());
  const auto order = claim_order(results.value()[0], false);
  auto large = read_large_rows(connection_, prefix_ + "payloads", results.value()[0], order, max_payload, budget);
  if (!large) return large.error();
  core::ClaimedSets sets;
  sets.lanes = decode(std::move(results.value()[0]), order, bytes.max_message, large.value());
  return sets;
}

core::Result<int> OutboxStore::own_write(const core::Result<Rows>& rows, const char* context) {
  if (!rows) return in_context(context, rows.error());
  if (const auto transaction = rows.value().optional_int64(0, 1)) connection_.note_own_transaction(*transaction);
  return static_cast<int>(rows.value().int64(0, 0));
}

core::Status OutboxStore::refresh_statistics() {
  return status_of(run("refresh_statistics", {}), "refreshing the outbox's statistics");
}

core::Result<int> OutboxStore::mark_dispatched(const std::vector<core::RowId>& ids, config::RetentionMode mode,
                                               std::string_view owner) {
  if (ids.empty()) return 0;
  const char* statement = mode == config::RetentionMode::keep ? "mark_dispatched" : "delete_dispatched";
  return own_write(run(statement, {int_array_literal(ids), std::string(owner)}), "marking rows dispatched");
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
  return own_write(run("record_failures", {int_array_literal(ids), int_array_literal(attempts),
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
  return static_cast<int>(rows.value().int64(0, 0));
}

core::Result<FailedPurge> OutboxStore::purge_failed(std::chrono::milliseconds keep_for, int batch) {
  if (batch <= 0) return FailedPurge{};
  const Params params{std::to_string(keep_for.count()), std::to_string(batch)};
  auto rows = run("purge_cancelled", params);
  if (!rows) return in_context("purging cancelled rows", rows.error());
  auto events = run("purge_events", params);
  if (!events) return in_context("purging row events", events.error());
  return FailedPurge{static_cast<int>(rows.value().int64(0, 0)), static_cast<int>(events.value().int64(0, 0))};
}

core::Status OutboxStore::arm_notify(std::string_view instance_id, bool armed) {
  return status_of(run("set_idle", {std::string(instance_id), std::string(armed ? "t" : "f")}),
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

core::Result<StandbyPosition> OutboxStore::standby_position(const std::optional<std::string>& standby) {
  auto rows = run("standby_position", {standby});
  if (!rows) return in_context("reading the standby's position", rows.error());
  return StandbyPosition{rows.value().int64(0, 0), rows.value().optional_int64(0, 1)};
}

core::Status OutboxStore::listen() {
  if (auto listening = connection_.listen(channel_); !listening) {
    return in_context("listening for wake-ups", listening.error());
  }
  return {};
}

}  // namespace outboxd::pg
