// Suspects of a lost connection: blame when alone, conviction after kMaxBlame.
#include "dispatch/connection_suspects.hpp"

#include <algorithm>

namespace outboxd::dispatch {

void ConnectionSuspects::blame(Suspicion& suspicion, std::string_view reason) {
  ++suspicion.blamed;
  suspicion.last_reason = std::string(reason);
}

// An attach under way takes the blame before any row: a broker that ends the
// connection over a message does so as it arrives, not while a link opens.
// The suspect that was under way alone is the one blamed; the others
// present become suspects, to be tried alone in their turn.
void ConnectionSuspects::on_connection_lost(const std::vector<std::string>& attaching,
                                            const std::vector<core::DeliveryKey>& in_flight,
                                            std::string_view reason) {
  if (!attaching.empty()) {
    if (attaching.size() == 1 && suspect(attaching.front())) {
      blame(destinations_[attaching.front()], reason);
      return;
    }
    for (const auto& destination : attaching) destinations_.try_emplace(destination);
    return;
  }
  const auto suspected =
      std::count_if(in_flight.begin(), in_flight.end(), [&](const core::DeliveryKey& row) { return suspect(row); });
  for (const core::DeliveryKey& row : in_flight) {
    auto [it, added] = rows_.try_emplace(row);
    if (!added && suspected == 1) blame(it->second, reason);
  }
  if (rows_.size() > kMaxRows) drop_unblamed_rows();
}

void ConnectionSuspects::on_link_open(const std::string& destination) { destinations_.erase(destination); }

void ConnectionSuspects::on_settled(const core::DeliveryKey& row) {
  if (!rows_.empty()) rows_.erase(row);
}

std::optional<std::string> ConnectionSuspects::conviction(const std::string& destination) const {
  const auto it = destinations_.find(destination);
  if (it == destinations_.end() || it->second.blamed < kMaxBlame) return std::nullopt;
  return "the connection ended each of the " + std::to_string(it->second.blamed) +
         " times a link to this destination was attached alone: " + it->second.last_reason;
}

std::optional<std::string> ConnectionSuspects::conviction(const core::DeliveryKey& row) const {
  const auto it = rows_.find(row);
  if (it == rows_.end() || it->second.blamed < kMaxBlame) return std::nullopt;
  return "the connection ended each of the " + std::to_string(it->second.blamed) +
         " times this row was sent alone: " + it->second.last_reason;
}

void ConnectionSuspects::drop_unblamed_rows() {
  std::erase_if(rows_, [](const auto& entry) { return entry.second.blamed == 0; });
}

}  // namespace outboxd::dispatch
