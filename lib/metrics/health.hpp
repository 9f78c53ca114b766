// Liveness and readiness state shared by the daemon's threads, and the verdicts /healthz and /readyz give.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "core/clock.hpp"

namespace outboxd::metrics {

// Written by the threads that know (main loop, AMQP thread), read by the
// HTTP threads; every field is a single atomic, so no lock and no torn reads.
struct Health {
  std::atomic<bool> database_up{false};
  std::atomic<bool> broker_up{false};
  std::atomic<bool> leases_held{false};
  std::atomic<bool> stopping{false};
  // steady-clock milliseconds of the main loop's last turn; 0: not turned yet.
  std::atomic<std::int64_t> loop_heartbeat_ms{0};
};

// Milliseconds since the steady clock's epoch, the unit of loop_heartbeat_ms.
std::int64_t steady_ms(core::SteadyTime time);

// The main loop calls this once per turn.
inline void beat(Health& health, core::SteadyTime now) {
  health.loop_heartbeat_ms.store(steady_ms(now), std::memory_order_relaxed);
}

struct Verdict {
  bool ok = false;
  std::string text;  // the response body: "ok", or the reason it is not
};

// /healthz: alive while the main loop turned within `stale_after` of `now`.
// The loop turns at least once per poll interval, so a longer silence means
// it is stuck, not idle.
Verdict liveness(const Health& health, core::SteadyTime now, std::chrono::seconds stale_after);

// /readyz: ready when the database and broker are up, leases are held and no
// shutdown is under way; otherwise names everything that is missing, e.g.
// "not ready: broker down, no leases held".
Verdict readiness(const Health& health);

}  // namespace outboxd::metrics
