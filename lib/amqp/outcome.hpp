// What the publisher reports back: one outcome per published row, and connection transitions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/outbox_message.hpp"

namespace outboxd::amqp {

struct Outcome {
  core::RowId id = 0;
  core::DeliveryOutcome outcome = core::DeliveryOutcome::unknown;
  std::string reason;  // why, for anything but accepted: the broker's condition, the connection error, ...
  std::uint32_t outbox = 0;  // the row's OutboxMessage::outbox: (outbox, id) names the row

  core::DeliveryKey key() const { return {outbox, id}; }
};

// Every outcome the publisher reports is made here, so that none leaves its outbox out.
inline Outcome outcome_for(const core::DeliveryKey& key, core::DeliveryOutcome outcome, std::string reason) {
  return {.id = key.id, .outcome = outcome, .reason = std::move(reason), .outbox = key.outbox};
}

// Called on the publisher's container thread (and, once the publisher has
// stopped, on the thread that calls publish() or stop()). Implementations
// must be cheap, thread-safe and must not throw.
class OutcomeSink {
 public:
  virtual ~OutcomeSink() = default;
  virtual void on_outcome(Outcome outcome) = 0;
  // up = true when a connection opened; up = false when an open connection
  // was lost and when a connection attempt failed, with the reason. `node` is
  // the broker node concerned, as host:port.
  virtual void on_connection(bool up, std::string node, std::string reason) = 0;
};

}  // namespace outboxd::amqp
