// systemd readiness, reload, watchdog, status and stopping notifications (no-ops outside systemd).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "core/clock.hpp"

namespace outboxd::daemon {

class ServiceManager {
 public:
  // `enabled` false: every call is a no-op (a run loop serving one outbox of
  // many: the supervisor alone speaks to the service manager).
  ServiceManager(const core::Clock& clock, bool enabled);

  // The interval the service manager's watchdog expects pings in
  // (WATCHDOG_USEC, for this process if WATCHDOG_PID is set), if any.
  static std::optional<std::chrono::microseconds> watchdog_interval();

  void ready();      // READY=1: at start-up once database and broker are up, and after a reload
  void reloading();  // RELOADING=1 with MONOTONIC_USEC, as sd_notify(3) asks of notify-reload services
  void stopping();   // STOPPING=1
  // STATUS=phase[: detail] when the phase differs from the last one sent, or
  // with `refresh` when the text changed: one datagram per change of state,
  // and counts no more often than the caller refreshes.
  void status(std::string_view phase, const std::string& detail, bool refresh);
  // Pings the watchdog when half its interval has passed; call every loop iteration.
  void keep_alive();
  // When the next ping is due, if a watchdog is configured.
  std::optional<core::SteadyTime> next_ping() const;

 private:
  const core::Clock& clock_;
  bool enabled_;
  std::optional<std::chrono::microseconds> watchdog_;
  core::SteadyTime next_ping_{};
  std::string phase_;   // of the last STATUS= sent
  std::string status_;  // the last STATUS= text sent
};

}  // namespace outboxd::daemon
