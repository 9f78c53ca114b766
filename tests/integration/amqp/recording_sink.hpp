// An OutcomeSink that records everything, for tests that wait on outcomes from another thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "amqp/outcome.hpp"

namespace outboxd::test {

class RecordingSink final : public amqp::OutcomeSink {
 public:
  void on_outcome(amqp::Outcome outcome) override {
    std::lock_guard lock(mutex_);
    outcomes_.push_back(std::move(outcome));
    // Wake the waiting test only when its count is reached: waking it for
    // each of 10,000 outcomes would measure the test, not the publisher.
    if (outcomes_.size() >= wanted_) changed_.notify_all();
  }
  void on_connection(bool up, std::string /*node*/, std::string reason) override {
    std::lock_guard lock(mutex_);
    connection_events_.emplace_back(up, std::move(reason));
    changed_.notify_all();
  }

  bool wait_for_outcomes(std::size_t count, std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
    std::unique_lock lock(mutex_);
    wanted_ = count;
    const bool reached = changed_.wait_for(lock, timeout, [&] { return outcomes_.size() >= count; });
    wanted_ = 0;
    return reached;
  }
  bool wait_for_connection_events(std::size_t count, std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return connection_events_.size() >= count; });
  }

  std::vector<amqp::Outcome> outcomes() const {
    std::lock_guard lock(mutex_);
    return outcomes_;
  }
  std::size_t outcome_count() const {
    std::lock_guard lock(mutex_);
    return outcomes_.size();
  }
  std::vector<std::pair<bool, std::string>> connection_events() const {
    std::lock_guard lock(mutex_);
    return connection_events_;
  }
  // Row id -> every outcome reported for it, in order.
  std::map<core::RowId, std::vector<amqp::Outcome>> by_id() const {
    std::map<core::RowId, std::vector<amqp::Outcome>> result;
    for (auto& outcome : outcomes()) result[outcome.id].push_back(outcome);
    return result;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<amqp::Outcome> outcomes_;
  std::size_t wanted_ = 0;
  std::vector<std::pair<bool, std::string>> connection_events_;
};

}  // namespace outboxd::test
