// NotifyPolicy: NOTIFY while rows trickle in, polling while they pour, hysteresis between.
#include <catch2/catch.hpp>

#include "dispatch/notify_policy.hpp"

using namespace std::chrono_literals;
using outboxd::core::ManualClock;
using outboxd::dispatch::NotifyPolicy;

namespace {

// `rows` per claim, one claim every `every`, for `duration`.
void stream(NotifyPolicy& policy, ManualClock& clock, std::size_t rows, std::chrono::milliseconds every,
            std::chrono::milliseconds duration) {
  for (auto t = 0ms; t < duration; t += every) {
    clock.advance(every);
    policy.on_claim(rows, clock.now());
  }
}

}  // namespace

TEST_CASE("A trickle keeps writers notifying", "[dispatch][wakeup]") {
  ManualClock clock;
  NotifyPolicy policy({}, clock.now());
  CHECK_FALSE(policy.busy());
  stream(policy, clock, 1, 10ms, 1000ms);  // 100 rows/s
  CHECK_FALSE(policy.busy());
}

TEST_CASE("A flood switches to polling, and back only below the lower rate", "[dispatch][wakeup]") {
  ManualClock clock;
  NotifyPolicy policy({}, clock.now());
  stream(policy, clock, 6, 10ms, 100ms);  // 600 rows/s
  CHECK(policy.busy());
  CHECK(policy.busy_poll() == 3ms);
  stream(policy, clock, 3, 10ms, 300ms);  // 300 rows/s: between the rates, stays busy
  CHECK(policy.busy());
  stream(policy, clock, 1, 10ms, 100ms);  // 100 rows/s
  CHECK_FALSE(policy.busy());
  stream(policy, clock, 4, 10ms, 300ms);  // 400 rows/s: between the rates, stays notifying
  CHECK_FALSE(policy.busy());
}

TEST_CASE("The rate is judged per window, not per claim", "[dispatch][wakeup]") {
  ManualClock clock;
  NotifyPolicy policy({}, clock.now());
  clock.advance(1ms);
  policy.on_claim(40, clock.now());  // one burst, 40,000 rows/s for an instant
  CHECK_FALSE(policy.busy());
  clock.advance(99ms);
  policy.on_claim(0, clock.now());   // 40 rows in 100 ms: 400 rows/s
  CHECK_FALSE(policy.busy());
  clock.advance(100ms);
  policy.on_claim(60, clock.now());  // 600 rows/s
  CHECK(policy.busy());
  clock.advance(3s);                 // rows stopped: the first claim after says so
  policy.on_claim(0, clock.now());
  CHECK_FALSE(policy.busy());
}
