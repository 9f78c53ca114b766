// Backoff: exact delays for pinned random draws, caps, jitter bounds and bad policies.
#include <catch2/catch.hpp>

#include <chrono>

#include "core/clock.hpp"
#include "dispatch/backoff.hpp"

using namespace std::chrono_literals;
using outboxd::core::Duration;
using outboxd::core::FastRandom;
using outboxd::core::FixedRandom;
using outboxd::dispatch::Backoff;
using outboxd::dispatch::BackoffPolicy;

namespace {

constexpr BackoffPolicy kPolicy{100ms, 1s, 2.0, 0.5};

Duration delay(const BackoffPolicy& policy, int attempt, double u) {
  FixedRandom random(u);
  return Backoff(policy).delay(attempt, random);
}

}  // namespace

TEST_CASE("Backoff grows by the multiplier and stops at the cap", "[dispatch][backoff]") {
  // u = 0.5 is the middle of the jitter range: factor exactly 1.
  CHECK(delay(kPolicy, 1, 0.5) == 100ms);
  CHECK(delay(kPolicy, 2, 0.5) == 200ms);
  CHECK(delay(kPolicy, 3, 0.5) == 400ms);
  CHECK(delay(kPolicy, 4, 0.5) == 800ms);
  CHECK(delay(kPolicy, 5, 0.5) == 1s);
  CHECK(delay(kPolicy, 6, 0.5) == 1s);
  CHECK(delay(kPolicy, 60, 0.5) == 1s);
}

TEST_CASE("Backoff jitter scales the capped delay by 1 + jitter * (2u - 1)", "[dispatch][backoff]") {
  CHECK(delay(kPolicy, 1, 0.0) == 50ms);    // factor 0.5
  CHECK(delay(kPolicy, 2, 0.25) == 150ms);  // factor 0.75
  CHECK(delay(kPolicy, 3, 0.75) == 500ms);  // factor 1.25
  CHECK(delay(kPolicy, 1, 1.0) == 150ms);   // factor 1.5
  CHECK(delay(kPolicy, 5, 0.0) == 500ms);   // capped first, then jittered down
  CHECK(delay(kPolicy, 10, 1.0) == 1500ms); // the ceiling: max * (1 + jitter)
}

TEST_CASE("Backoff without jitter ignores the random draw", "[dispatch][backoff]") {
  const BackoffPolicy policy{250ms, 2s, 3.0, 0.0};
  for (const double u : {0.0, 0.3, 0.999}) {
    CHECK(delay(policy, 1, u) == 250ms);
    CHECK(delay(policy, 2, u) == 750ms);
    CHECK(delay(policy, 3, u) == 2s);
  }
}

TEST_CASE("Backoff treats attempts below 1 as the first", "[dispatch][backoff]") {
  CHECK(delay(kPolicy, 0, 0.5) == 100ms);
  CHECK(delay(kPolicy, -7, 0.5) == 100ms);
}

TEST_CASE("Backoff does not overflow for huge attempts or huge caps", "[dispatch][backoff]") {
  CHECK(delay(kPolicy, 1'000'000, 0.5) == 1s);
  CHECK(delay({100ms, Duration::max(), 10.0, 0.2}, 100'000, 1.0) == Duration::max());
  CHECK(delay({100ms, Duration::max(), 10.0, 0.2}, 100'000, 0.5) > Duration::zero());
  CHECK(delay({0ms, 1s, 10.0, 0.2}, 100'000, 1.0) == 0ms);
}

TEST_CASE("Backoff bends a nonsensical policy into a working one", "[dispatch][backoff]") {
  SECTION("a multiplier below 1 never shrinks the delay") {
    CHECK(delay({100ms, 1s, 0.5, 0.0}, 4, 0.5) == 100ms);
  }
  SECTION("jitter above 1 is clamped to 1: the delay is never negative") {
    CHECK(delay({100ms, 1s, 2.0, 3.0}, 1, 0.0) == 0ms);
    CHECK(delay({100ms, 1s, 2.0, 3.0}, 1, 1.0) == 200ms);
  }
  SECTION("negative jitter counts as none") {
    CHECK(delay({100ms, 1s, 2.0, -0.5}, 1, 0.0) == 100ms);
  }
  SECTION("an initial delay above the cap is capped") {
    CHECK(delay({5s, 1s, 2.0, 0.0}, 1, 0.5) == 1s);
  }
  SECTION("negative durations count as zero") {
    CHECK(delay({-5s, -1s, 2.0, 0.5}, 3, 1.0) == 0ms);
  }
  SECTION("a draw outside [0, 1] is clamped") {
    CHECK(delay(kPolicy, 1, 7.0) == 150ms);
    CHECK(delay(kPolicy, 1, -7.0) == 50ms);
  }
}

TEST_CASE("Backoff stays within its jitter band for random draws", "[dispatch][backoff]") {
  const Backoff backoff(kPolicy);
  FastRandom random(42);
  for (int attempt = 1; attempt <= 12; ++attempt) {
    const Duration base = std::min<Duration>(100ms * (1 << (attempt - 1)), 1s);
    for (int i = 0; i < 1000; ++i) {
      const Duration d = backoff.delay(attempt, random);
      REQUIRE(d >= base / 2);
      REQUIRE(d <= base + base / 2);
      REQUIRE(d <= 1500ms);
    }
  }
}

TEST_CASE("bounded delays double from min to max and stay within them (the broker's reconnects)", "[dispatch][backoff]") {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const Backoff reconnect({100ms, 1000ms, 2.0, 0.2});
  FixedRandom random(0.5);  // factor 1.0
  const auto at = [&](int attempt) { return duration_cast<milliseconds>(reconnect.bounded_delay(attempt, random)); };
  CHECK(at(1) == 100ms);
  CHECK(at(2) == 200ms);
  CHECK(at(3) == 400ms);
  CHECK(at(4) == 800ms);
  CHECK(at(5) == 1000ms);
  CHECK(at(6) == 1000ms);

  random.set(0.0);  // factor 0.8
  CHECK(at(1) == 100ms);  // 80 ms raised to the minimum
  CHECK(at(2) == 160ms);
  random.set(0.999999);  // factor just below 1.2
  CHECK(at(3) == 479ms);
  CHECK(at(4) == 959ms);
  CHECK(at(5) == 1000ms);  // 1199 ms lowered to the maximum

  const Backoff inverted({100ms, 10ms, 2.0, 0.2});
  CHECK(inverted.bounded_delay(3, random) == 100ms);
}
