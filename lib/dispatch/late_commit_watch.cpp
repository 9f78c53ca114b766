// Late-commit watch: which open transactions to check again, and when.
#include "dispatch/late_commit_watch.hpp"

#include <algorithm>

namespace outboxd::dispatch {

LateCommitWatch::LateCommitWatch(core::Duration first_delay, core::Duration max_delay)
    : first_delay_(first_delay), max_delay_(std::max(first_delay, max_delay)) {}

void LateCommitWatch::watch(std::vector<std::string> transactions, core::SteadyTime now) {
  watched_ = std::move(transactions);
  delay_ = first_delay_;
  next_check_.reset();
  if (!watched_.empty()) next_check_ = now + delay_;
}

bool LateCommitWatch::update(std::vector<std::string> still_running, core::SteadyTime now) {
  const bool some_ended = still_running.size() < watched_.size();
  watched_ = std::move(still_running);
  next_check_.reset();
  if (watched_.empty()) return some_ended;
  // A long transaction (a migration, a report) is checked ever more rarely.
  delay_ = some_ended ? first_delay_ : std::min(max_delay_, delay_ * 2);
  next_check_ = now + delay_;
  return some_ended;
}

void LateCommitWatch::clear() {
  watched_.clear();
  next_check_.reset();
}

}  // namespace outboxd::dispatch
