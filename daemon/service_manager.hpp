// systemd readiness, watchdog and stopping notifications (no-ops outside systemd).
#pragma once

#include <chrono>
#include <optional>

#include "core/clock.hpp"

namespace outboxd::daemon {

class ServiceManager {
 public:
  explicit ServiceManager(const core::Clock& clock);

  void ready();
  void stopping();
  // Pings the watchdog when half its interval has passed; call every loop iteration.
  void keep_alive();
  // When the next ping is due, if a watchdog is configured.
  std::optional<core::SteadyTime> next_ping() const;

 private:
  const core::Clock& clock_;
  std::optional<std::chrono::microseconds> watchdog_;
  core::SteadyTime next_ping_{};
};

}  // namespace outboxd::daemon
