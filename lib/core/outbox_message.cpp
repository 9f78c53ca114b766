// A row's session key, a delivery's description, and the names of delivery outcomes for logs and metrics labels.
#include "core/outbox_message.hpp"

namespace outboxd::core {

std::string session_key(const std::optional<std::string>& writer, std::string_view session) {
  std::string key(session);
  if (writer) {
    key += '\0';
    key += *writer;
  }
  return key;
}

std::optional<std::string> session_key(const OutboxMessage& row) {
  if (!row.session_id || row.session_id->empty()) return std::nullopt;
  return session_key(row.writer, *row.session_id);
}

std::string describe(const DeliveryKey& key) {
  std::string text = "row " + std::to_string(key.id);
  if (key.outbox != 0) text += " of outbox " + std::to_string(key.outbox);
  return text;
}

const char* to_string(DeliveryOutcome outcome) {
  switch (outcome) {
    case DeliveryOutcome::accepted: return "accepted";
    case DeliveryOutcome::rejected: return "rejected";
    case DeliveryOutcome::unsendable: return "unsendable";
    case DeliveryOutcome::released: return "released";
    case DeliveryOutcome::unknown: return "unknown";
    case DeliveryOutcome::connection_lost: return "connection_lost";
    case DeliveryOutcome::not_sent: return "not_sent";
  }
  return "unknown";
}

}  // namespace outboxd::core
