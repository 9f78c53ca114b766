// Hands broker outcomes from the AMQP thread to the main thread.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "amqp/publisher.hpp"
#include "daemon/run/event_loop.hpp"
#include "daemon/run/ports.hpp"

namespace outboxd::daemon {

class OutcomeQueue final : public amqp::OutcomeSink {
 public:
  explicit OutcomeQueue(EventFd& event_fd) : event_fd_(event_fd) {}

  // AMQP thread.
  void on_outcome(amqp::Outcome outcome) override;
  void on_connection(bool up, std::string node, std::string reason) override;
  // A connection shared with other outboxes is up as this queue's loop starts (BrokerNews' replay).
  void replay_connection(std::string node);

  // Main thread: everything that arrived since the last call.
  BrokerNews take();

 private:
  EventFd& event_fd_;
  std::mutex mutex_;
  BrokerNews pending_;  // guarded by mutex_
};

}  // namespace outboxd::daemon
