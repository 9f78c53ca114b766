// When writers should NOTIFY: only while rows arrive slowly enough that their commits do not queue on it.
#pragma once

#include <cstddef>

#include "core/clock.hpp"

namespace outboxd::dispatch {

// NOTIFY serialises commits: with a notification on every commit, eight
// writers here managed about half their commit rate. So the daemon asks for
// notifications (marks itself idle) only while rows arrive slowly; once they
// arrive faster than busy_rate it stops asking and claims every busy_poll
// instead, until the rate falls below idle_rate. The rate is measured over
// windows of `window` from the rows each claim returned.
class NotifyPolicy {
 public:
  struct Settings {
    double busy_rate = 500;   // rows/s: above this, poll
    double idle_rate = 200;   // rows/s: below this, back to NOTIFY
    core::Duration window = std::chrono::milliseconds(100);
    core::Duration busy_poll = std::chrono::milliseconds(3);
  };

  explicit NotifyPolicy(Settings settings, core::SteadyTime now);

  // A claim returned `rows` rows.
  void on_claim(std::size_t rows, core::SteadyTime now);

  // True while rows arrive fast: do not ask writers to NOTIFY; claim again
  // at `now + busy_poll()` after a short claim.
  bool busy() const { return busy_; }
  core::Duration busy_poll() const { return settings_.busy_poll; }

 private:
  Settings settings_;
  core::SteadyTime window_start_;
  std::size_t window_rows_ = 0;
  bool busy_ = false;
};

}  // namespace outboxd::dispatch
