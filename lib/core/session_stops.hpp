// The rows of a session wait behind the lowest row that stops it.
#pragma once

#include <string>
#include <unordered_map>

#include "core/outbox_message.hpp"

namespace outboxd::core {

// The one C++ statement of "a row waits behind a lower row of its session
// that stops it", a session being its session_key(). What stops a session
// is the asker's: dispatch::ClaimPass stops it at the rows its pass moved
// past (asked by RowBook::on_claim), and the unit tests' fake database at
// its parked and backing-off rows, as the claim's not_blocked() does in SQL.
class SessionStops {
 public:
  // Row `id` of session `session` (a session_key()) stops its later rows.
  void stop(RowId id, const std::string& session);
  // A lower row of the row's session stops it; a row without session never waits.
  bool waits(const OutboxMessage& row) const;
  bool empty() const { return lowest_.empty(); }
  void clear() { lowest_.clear(); }

 private:
  std::unordered_map<std::string, RowId> lowest_;  // session key: the lowest id that stops it
};

}  // namespace outboxd::core
