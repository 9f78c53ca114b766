// OutcomeRouter: outcomes to their job's queue under one lock; the queues never call back into it.
#include "daemon/tenants/outcome_router.hpp"

namespace outboxd::daemon::tenants {

void OutcomeRouter::on_outcome(amqp::Outcome outcome) {
  std::lock_guard lock(mutex_);
  const auto queue = queues_.find(outcome.outbox);
  if (queue == queues_.end()) {
    ++dropped_;
    return;
  }
  queue->second->on_outcome(std::move(outcome));
}

void OutcomeRouter::on_connection(bool up, std::string node, std::string reason) {
  std::lock_guard lock(mutex_);
  up_ = up;
  node_ = node;
  for (const auto& [route, queue] : queues_) queue->on_connection(up, node, reason);
}

void OutcomeRouter::attach(std::uint32_t route, OutcomeQueue& queue) {
  std::lock_guard lock(mutex_);
  queues_[route] = &queue;
  if (up_) queue.replay_connection(node_);
}

void OutcomeRouter::detach(std::uint32_t route) {
  std::lock_guard lock(mutex_);
  queues_.erase(route);
}

bool OutcomeRouter::up() const {
  std::lock_guard lock(mutex_);
  return up_;
}

std::uint64_t OutcomeRouter::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

}  // namespace outboxd::daemon::tenants
