// Outcome hand-off: append under a lock, wake the main thread on the first item.
#include "daemon/run/outcome_queue.hpp"

#include <utility>

namespace outboxd::daemon {

void OutcomeQueue::on_outcome(amqp::Outcome outcome) {
  bool first = false;
  {
    std::lock_guard lock(mutex_);
    first = pending_.outcomes.empty() && pending_.connection_events.empty();
    pending_.outcomes.push_back(std::move(outcome));
  }
  // One wake-up per batch: the main thread takes everything queued by then.
  if (first) event_fd_.notify();
}

void OutcomeQueue::on_connection(bool up, std::string node, std::string reason) {
  {
    std::lock_guard lock(mutex_);
    pending_.connection_events.push_back({up, std::move(node), std::move(reason)});
  }
  event_fd_.notify();
}

void OutcomeQueue::replay_connection(std::string node) {
  {
    std::lock_guard lock(mutex_);
    pending_.connection_events.push_back({true, std::move(node), "", true});
  }
  event_fd_.notify();
}

BrokerNews OutcomeQueue::take() {
  BrokerNews taken;
  std::lock_guard lock(mutex_);
  std::swap(taken, pending_);
  return taken;
}

}  // namespace outboxd::daemon
