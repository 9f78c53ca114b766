// What a part of the run loop is built on in its own unit tests: a manual clock, fixed randomness,
// the fake database connected, the metrics and the loop's timers; logging off; and the parts wired.
#pragma once

#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include "daemon/run/claim_step.hpp"
#include "daemon/run/decision_writer.hpp"
#include "daemon/run/lease_keeper.hpp"
#include "daemon/run/publish_step.hpp"
#include "daemon/run/run_loop.hpp"
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

// The loop's claim, mark and publish sides wired as the loop wires them, its
// partitions leased, the broker fake and not yet started.
struct WiredParts : PartsFixture {
  static constexpr const char* kInstance = "parts-test";

  explicit WiredParts(config::Config config = {})
      : loop_config(std::move(config)),
        book(planner_policy(loop_config.dispatch, loop_config.destinations), clock, random),
        leases(loop_config.leases, kInstance, clock),
        decisions(DecisionWriter::settings_of(loop_config), kInstance, book, database, metrics, timers, clock),
        claims(ClaimStep::settings_of(loop_config), loop_config.dispatch, kInstance, book, database, leases, metrics,
               timers, clock, [this](const core::Error& error) { failures.push_back(error.message); }),
        publisher(broker, book, leases, decisions, metrics, clock) {
    std::vector<int> stopped;
    std::vector<int> gained;
    REQUIRE(leases.maintain(database, stopped, gained));
  }

  config::Config loop_config;
  dispatch::RowBook book;
  LeaseKeeper leases;
  DecisionWriter decisions;
  std::vector<std::string> failures;  // what the parts handed to the loop's fail_database
  ClaimStep claims;
  FakeBroker broker;
  PublishStep publisher;
};

}  // namespace outboxd::daemon::test
