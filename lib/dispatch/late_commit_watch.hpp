// Catches rows whose writers missed the wake-up: transactions open while the daemon armed NOTIFY.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"

namespace outboxd::dispatch {

// Writers NOTIFY only while an instance is idle, and they decide when they
// insert, by what their snapshot shows. A transaction that inserted just
// before the daemon armed (or whose snapshot is older than the arming), and
// commits just after the daemon's last claim, sends no notification and its
// row is not seen. Those transactions are among the ones in progress right
// after arming (their ids, opaque here). The watch asks the caller to check
// them with a growing delay, and to claim again whenever some of them ended;
// it is done once none is left.
class LateCommitWatch {
 public:
  LateCommitWatch(core::Duration first_delay, core::Duration max_delay);

  // After arming: the transactions in progress then (replaces any earlier set).
  void watch(std::vector<std::string> transactions, core::SteadyTime now);
  // The ones still in progress when checked. True when some ended: claim again.
  bool update(std::vector<std::string> still_running, core::SteadyTime now);
  // Stop watching (the daemon went back to claiming without being told).
  void clear();

  bool check_due(core::SteadyTime now) const { return next_check_ && now >= *next_check_; }
  std::optional<core::SteadyTime> next_check() const { return next_check_; }
  const std::vector<std::string>& watched() const { return watched_; }

 private:
  core::Duration first_delay_;
  core::Duration max_delay_;
  core::Duration delay_{};
  std::vector<std::string> watched_;
  std::optional<core::SteadyTime> next_check_;
};

}  // namespace outboxd::dispatch
