// String names of delivery outcomes, for logs and metrics labels.
#include "core/outbox_message.hpp"

namespace outboxd::core {

const char* to_string(DeliveryOutcome outcome) {
  switch (outcome) {
    case DeliveryOutcome::accepted: return "accepted";
    case DeliveryOutcome::rejected: return "rejected";
    case DeliveryOutcome::unsendable: return "unsendable";
    case DeliveryOutcome::released: return "released";
    case DeliveryOutcome::unknown: return "unknown";
    case DeliveryOutcome::not_sent: return "not_sent";
  }
  return "unknown";
}

}  // namespace outboxd::core
