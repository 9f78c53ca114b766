// What `outboxd requeue`, `skip` and `replay` change, through the functions of 014_operations.sql, which write row_events.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "pg/connection.hpp"

namespace outboxd::pg {

// Parked rows by message id, of a session, or all of them (any combination),
// of one writer when named. A message id or session that names rows of more
// than one writer is refused unless the writer is named (ids are per writer).
struct ParkedTarget {
  std::vector<std::string> message_ids;
  std::string session_id;
  bool all_parked = false;
  std::string writer;  // empty: any
};

// One end of a replay's dispatched_at window: a time PostgreSQL reads
// (timestamptz input), or a span before the database's now().
struct TimeBound {
  std::optional<std::string> at;
  std::optional<std::chrono::milliseconds> ago;
};

// Dispatched rows to send again; empty fields do not select.
struct ReplaySelection {
  std::vector<std::string> message_ids;
  std::string session_id;
  std::string destination;
  std::string writer;  // empty: any, as for ParkedTarget
  TimeBound since;
  TimeBound until;
  int limit = 1000;  // more matching rows than this: refused (dry runs count them)
};

struct ReplayReport {
  std::vector<std::string> message_ids;  // in id order, at most the limit
  std::int64_t matched = 0;
  std::int64_t waiting_behind = 0;  // pending rows of their sessions that now wait for them
};

// os_user is recorded beside the database's session_user; empty records none.
class OperatorActions {
 public:
  OperatorActions(Connection& connection, const std::string& schema, std::string os_user);

  // The message ids changed, in id order.
  core::Result<std::vector<std::string>> requeue(const ParkedTarget& target);
  core::Result<std::vector<std::string>> skip(const ParkedTarget& target);
  core::Result<ReplayReport> replay(const ReplaySelection& selection, bool dry_run);

 private:
  core::Result<std::vector<std::string>> act_on_parked(const char* function, const ParkedTarget& target,
                                                       const char* context);

  Connection& connection_;
  std::string schema_;  // quoted
  std::optional<std::string> os_user_;
};

}  // namespace outboxd::pg
