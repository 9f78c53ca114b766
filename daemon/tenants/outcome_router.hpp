// One publisher, many run loops: each outcome goes back to the loop whose row it was, by the row's route.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "amqp/outcome.hpp"
#include "daemon/run/outcome_queue.hpp"

namespace outboxd::daemon::tenants {

// The publisher's sink when a daemon serves many outboxes. Every serve job
// stamps its rows with a route of its own (OutboxMessage::outbox, never
// reused while the daemon runs), so an outcome that arrives after its job
// ended (the job failed, or yielded before its last outcome) finds no queue
// and is dropped: its row was not marked and is published again later, like
// any row whose outcome was lost. Connection news goes to every queue.
class OutcomeRouter final : public amqp::OutcomeSink {
 public:
  // AMQP thread.
  void on_outcome(amqp::Outcome outcome) override;
  void on_connection(bool up, std::string node, std::string reason) override;

  // Serve jobs' threads: a queue joins (told at once if the connection is up) or leaves.
  void attach(std::uint32_t route, OutcomeQueue& queue);
  void detach(std::uint32_t route);

  bool up() const;
  std::uint64_t dropped() const;  // outcomes whose job had ended

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::uint32_t, OutcomeQueue*> queues_;  // guarded by mutex_
  bool up_ = false;
  std::string node_;
  std::uint64_t dropped_ = 0;
};

}  // namespace outboxd::daemon::tenants
