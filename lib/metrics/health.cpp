// The /healthz and /readyz verdicts as pure functions of the shared Health state.
#include "metrics/health.hpp"

#include <vector>

namespace outboxd::metrics {

std::int64_t steady_ms(core::SteadyTime time) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
}

Verdict liveness(const Health& health, core::SteadyTime now, std::chrono::seconds stale_after) {
  const std::int64_t last = health.loop_heartbeat_ms.load(std::memory_order_relaxed);
  if (last == 0) return {false, "main loop not started"};
  const std::int64_t age_ms = steady_ms(now) - last;
  const std::int64_t limit_ms = std::chrono::duration_cast<std::chrono::milliseconds>(stale_after).count();
  if (age_ms <= limit_ms) return {true, "ok"};
  return {false, "main loop stalled: last turn " + std::to_string(age_ms / 1000) + " s ago (limit " +
                     std::to_string(stale_after.count()) + " s)"};
}

Verdict readiness(const Health& health) {
  std::vector<const char*> missing;
  if (!health.database_up.load(std::memory_order_relaxed)) missing.push_back("database down");
  if (!health.broker_up.load(std::memory_order_relaxed)) missing.push_back("broker down");
  if (!health.leases_held.load(std::memory_order_relaxed)) missing.push_back("no leases held");
  if (health.stopping.load(std::memory_order_relaxed)) missing.push_back("stopping");
  if (missing.empty()) return {true, "ok"};
  std::string text = "not ready: ";
  for (std::size_t i = 0; i < missing.size(); ++i) {
    if (i > 0) text += ", ";
    text += missing[i];
  }
  return {false, text};
}

}  // namespace outboxd::metrics
