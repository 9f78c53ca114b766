// sd_notify wrappers: READY=1 once running, WATCHDOG=1 while the loop turns, STOPPING=1.
#include "daemon/service_manager.hpp"

#include <systemd/sd-daemon.h>

#include <cstdint>

namespace outboxd::daemon {

ServiceManager::ServiceManager(const core::Clock& clock) : clock_(clock) {
  std::uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) watchdog_ = std::chrono::microseconds(usec);
}

void ServiceManager::ready() { sd_notify(0, "READY=1\nSTATUS=dispatching"); }

void ServiceManager::stopping() { sd_notify(0, "STOPPING=1\nSTATUS=waiting for in-flight deliveries"); }

void ServiceManager::keep_alive() {
  if (!watchdog_) return;
  const auto now = clock_.now();
  if (now < next_ping_) return;
  sd_notify(0, "WATCHDOG=1");
  next_ping_ = now + *watchdog_ / 2;
}

std::optional<core::SteadyTime> ServiceManager::next_ping() const {
  if (!watchdog_) return std::nullopt;
  return next_ping_;
}

}  // namespace outboxd::daemon
