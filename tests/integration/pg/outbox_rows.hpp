// Test rows for <schema>.messages, inserted directly with chosen timestamps and states.
#pragma once

#include <catch2/catch.hpp>

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/outbox_message.hpp"
#include "dispatch/claim_merge.hpp"
#include "pg/outbox_store.hpp"
#include "scratch_database.hpp"

namespace outboxd::pg::testing {

using Ids = std::vector<core::RowId>;

// A claim as the daemon sees it: the store's result sets merged by the pure core.
inline core::Result<dispatch::Claim> claim(OutboxStore& store, const std::vector<int>& partitions, int limit,
                                           core::RowId after_id = 0, std::span<const core::RowId> known = {}) {
  auto sets = store.claim(partitions, limit, after_id, known);
  if (!sets) return sets.error();
  return dispatch::merge_claim(std::move(sets).value(), static_cast<std::size_t>(limit));
}

inline std::vector<core::RowId> ids_of(const std::vector<core::OutboxMessage>& messages) {
  std::vector<core::RowId> ids;
  for (const auto& m : messages) ids.push_back(m.id);
  return ids;
}

// Every partition of a database migrated with default_options() (8 partitions).
inline std::vector<int> all_partitions() { return {0, 1, 2, 3, 4, 5, 6, 7}; }

// The ids of one claim of every partition, as the daemon would merge them.
inline std::vector<core::RowId> claim_ids(OutboxStore& store, int limit = 100) {
  auto claimed = claim(store, all_partitions(), limit);
  if (!claimed) FAIL("claim: " << claimed.error().message);
  return ids_of(claimed.value().rows);
}

struct TestRow {
  std::string message_id;
  std::optional<std::string> session_id;
  std::string created_at = "now()";  // SQL expressions
  std::string due_at = "now()";
  std::string status = "pending";
  std::string next_attempt_at = "NULL";
  std::string finished_at = "NULL";  // dispatched_at or cancelled_at, by status
  std::string destination = "orders";
  std::string writer = "session_user";  // as the column's default fills it; 'app_a', or NULL (before 009)
};

inline core::RowId insert(Connection& connection, const TestRow& row, const std::string& schema = "outbox") {
  const std::string finished = row.finished_at == "NULL" && (row.status == "dispatched" || row.status == "cancelled")
                                   ? "now()"
                                   : row.finished_at;
  const std::string sql =
      "INSERT INTO \"" + schema + "\".messages (message_id, destination, session_id, body, created_at, due_at, "
      "status, next_attempt_at, dispatched_at, cancelled_at, writer) VALUES ($1, $3, $2, '\\x00ff'::bytea, " +
      row.created_at + ", " + row.due_at + ", '" + row.status + "', " + row.next_attempt_at + ", " +
      (row.status == "dispatched" ? finished : "NULL") + ", " + (row.status == "cancelled" ? finished : "NULL") +
      ", " + row.writer + ") RETURNING id";
  return must(connection, sql, {row.message_id, row.session_id, row.destination}).int64(0, 0);
}

// Marks and failures are fenced by lease: tests act as this owner of every partition.
constexpr const char* kLeaseOwner = "test-owner";
inline void lease_all(Connection& connection, const std::string& schema = "outbox") {
  must(connection, "UPDATE \"" + schema + "\".leases SET owner = '" + kLeaseOwner +
                       "', expires_at = now() + interval '1 hour'");
}

}  // namespace outboxd::pg::testing
