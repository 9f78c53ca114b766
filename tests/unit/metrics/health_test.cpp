// Unit tests of the /healthz and /readyz verdicts, with a manual clock.
#include <catch2/catch.hpp>

#include "core/clock.hpp"
#include "metrics/health.hpp"

using namespace outboxd;
using namespace outboxd::metrics;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE("Liveness follows the main loop's heartbeat", "[metrics]") {
  core::ManualClock clock;
  Health health;

  const auto before = liveness(health, clock.now(), seconds(30));
  CHECK_FALSE(before.ok);
  CHECK(before.text == "main loop not started");

  beat(health, clock.now());
  CHECK(health.loop_heartbeat_ms.load() == steady_ms(clock.now()));
  CHECK(liveness(health, clock.now(), seconds(30)).ok);
  CHECK(liveness(health, clock.now(), seconds(30)).text == "ok");

  clock.advance(seconds(30));
  CHECK(liveness(health, clock.now(), seconds(30)).ok);  // exactly at the limit: still alive

  clock.advance(milliseconds(1500));
  const auto stale = liveness(health, clock.now(), seconds(30));
  CHECK_FALSE(stale.ok);
  CHECK(stale.text == "main loop stalled: last turn 31 s ago (limit 30 s)");

  beat(health, clock.now());
  CHECK(liveness(health, clock.now(), seconds(30)).ok);
}

TEST_CASE("Liveness honours the configured limit", "[metrics]") {
  core::ManualClock clock;
  Health health;
  beat(health, clock.now());
  clock.advance(seconds(6));
  CHECK_FALSE(liveness(health, clock.now(), seconds(5)).ok);
  CHECK(liveness(health, clock.now(), seconds(60)).ok);
}

TEST_CASE("Readiness names everything that is missing", "[metrics]") {
  Health health;
  CHECK(readiness(health).text == "not ready: database down, broker down, no leases held");

  health.database_up = true;
  health.leases_held = true;
  const auto broker = readiness(health);
  CHECK_FALSE(broker.ok);
  CHECK(broker.text == "not ready: broker down");

  health.broker_up = true;
  const auto ready = readiness(health);
  CHECK(ready.ok);
  CHECK(ready.text == "ok");

  health.stopping = true;
  CHECK_FALSE(readiness(health).ok);
  CHECK(readiness(health).text == "not ready: stopping");

  health.stopping = false;
  health.leases_held = false;
  CHECK(readiness(health).text == "not ready: no leases held");
}
