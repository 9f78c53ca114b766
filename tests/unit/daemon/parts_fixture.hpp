// What a part of the run loop is built on in its own unit tests: a manual clock, fixed randomness,
// the fake database connected, the metrics and the loop's timers; logging off.
#pragma once

#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include "daemon/run/run_loop_metrics.hpp"
#include "dispatch/loop_timers.hpp"
#include "fakes.hpp"
#include "metrics/registry.hpp"

namespace outboxd::daemon::test {

struct PartsFixture {
  PartsFixture() {
    spdlog::set_level(spdlog::level::off);
    REQUIRE(database.ensure_connected());
  }
  ~PartsFixture() { spdlog::set_level(spdlog::level::info); }

  core::ManualClock clock;
  core::FixedRandom random{0.5};  // no jitter
  FakeDatabase database{clock};
  metrics::Registry registry;
  RunLoopMetrics metrics{registry};
  dispatch::LoopTimers timers;
};

}  // namespace outboxd::daemon::test
