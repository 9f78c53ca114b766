// sd_notify wrappers: READY=1 once connected, RELOADING=1, WATCHDOG=1 while the loop turns, STATUS=, STOPPING=1.
#include "daemon/run/service_manager.hpp"

#include <systemd/sd-daemon.h>

#include <cstdint>
#include <ctime>

namespace outboxd::daemon {

ServiceManager::ServiceManager(const core::Clock& clock, bool enabled)
    : clock_(clock), enabled_(enabled), watchdog_(enabled ? watchdog_interval() : std::nullopt) {}

std::optional<std::chrono::microseconds> ServiceManager::watchdog_interval() {
  std::uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) return std::chrono::microseconds(usec);
  return std::nullopt;
}

void ServiceManager::ready() {
  if (enabled_) sd_notify(0, "READY=1");
}

// MONOTONIC_USEC lets the service manager tell this reload from an earlier one;
// it is CLOCK_MONOTONIC whatever clock the loop runs on.
void ServiceManager::reloading() {
  if (!enabled_) return;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const auto usec = static_cast<unsigned long long>(now.tv_sec) * 1000000ULL +
                    static_cast<unsigned long long>(now.tv_nsec) / 1000ULL;
  sd_notifyf(0, "RELOADING=1\nSTATUS=reloading\nMONOTONIC_USEC=%llu", usec);
  phase_ = "reloading";
  status_ = phase_;
}

void ServiceManager::stopping() {
  if (enabled_) sd_notify(0, "STOPPING=1");
}

void ServiceManager::status(std::string_view phase, const std::string& detail, bool refresh) {
  if (!enabled_) return;
  const bool new_phase = phase != phase_;
  std::string text(phase);
  if (!detail.empty()) text += ": " + detail;
  if (!new_phase && (!refresh || text == status_)) return;
  sd_notify(0, ("STATUS=" + text).c_str());
  phase_ = phase;
  status_ = std::move(text);
}

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
