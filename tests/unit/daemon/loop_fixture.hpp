// The run loop over fake ports, a manual clock and fixed randomness: the set-up its unit tests share.
#pragma once

#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include <csignal>

#include "daemon/run/run_loop.hpp"
#include "fakes.hpp"

namespace outboxd::daemon::test {


inline config::Config test_config() {
  config::Config config;
  config.dispatch.batch_size = 10;
  config.dispatch.in_flight = 100;
  config.dispatch.max_attempts = 3;
  config.dispatch.backoff_initial = 100ms;
  config.dispatch.backoff_max = 1s;
  config.dispatch.poll_interval = 1s;
  config.dispatch.shutdown_timeout = 2s;
  return config;
}

struct LoopFixture {
  explicit LoopFixture(config::Config config = test_config())
      : database(clock), events(clock, broker), loop(std::move(config), "test-instance", {database, broker, events, clock, random}) {
    spdlog::set_level(spdlog::level::off);
    REQUIRE_FALSE(loop.start().has_value());
  }
  ~LoopFixture() { spdlog::set_level(spdlog::level::info); }

  // Turns the loop until `done` holds; false if the loop ended or 500 turns did not get there.
  template <class Done>
  bool turn_until(Done done) {
    for (int i = 0; i < 500; ++i) {
      if (done()) return true;
      if (!loop.iterate()) return done();
    }
    return false;
  }
  bool all(FakeDatabase::Status status) const { return database.count(status) == database.table.size(); }
  // SIGTERM, then turns until the loop ends; the exit code.
  int stop() {
    events.signals.push_back(SIGTERM);
    for (int i = 0; i < 500 && loop.iterate(); ++i) {
    }
    return loop.finish();
  }

  core::ManualClock clock;
  core::FixedRandom random{0.5};  // no jitter: backoffs are 100 ms, 200 ms, ...
  FakeDatabase database;
  FakeBroker broker;
  FakeEvents events;
  RunLoop loop;
};

}  // namespace outboxd::daemon::test
