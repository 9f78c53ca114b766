// Which rows wait behind a lower row of their session.
#include "core/session_stops.hpp"

#include <algorithm>

namespace outboxd::core {

void SessionStops::stop(RowId id, const std::string& session) {
  const auto [at, inserted] = lowest_.try_emplace(session, id);
  if (!inserted) at->second = std::min(at->second, id);
}

bool SessionStops::waits(const OutboxMessage& row) const {
  if (lowest_.empty()) return false;  // the usual case: no key to build
  const auto session = session_key(row);
  if (!session) return false;
  const auto stopped = lowest_.find(*session);
  return stopped != lowest_.end() && row.id > stopped->second;
}

}  // namespace outboxd::core
