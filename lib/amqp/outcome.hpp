// What the publisher reports back: one outcome per published row, and connection transitions.
#pragma once

#include <string>

#include "core/outbox_message.hpp"

namespace outboxd::amqp {

struct Outcome {
  core::RowId id = 0;
  core::DeliveryOutcome outcome = core::DeliveryOutcome::unknown;
  std::string reason;  // why, for anything but accepted: the broker's condition, the connection error, ...
};

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
