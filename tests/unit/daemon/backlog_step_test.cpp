// BacklogStep on its own: measured at once and then every interval, only when served, its failures the loop's.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "daemon/run/backlog_step.hpp"
#include "daemon/run/lease_keeper.hpp"
#include "parts_fixture.hpp"

namespace outboxd::daemon::test {
namespace {

struct BacklogFixture : PartsFixture {
  explicit BacklogFixture(BacklogStep::Settings settings)
      : leases(config.leases, "backlog-test", clock),
        step(settings, registry, database, leases, timers, clock,
             [this](const core::Error& error) { failures.push_back(error.message); }) {}

  config::Config config;
  LeaseKeeper leases;
  std::vector<std::string> failures;
  BacklogStep step;
};

}  // namespace

TEST_CASE("BacklogStep measures at once, then once per interval, and not while stopping", "[daemon][backlog_step]") {
  BacklogFixture f({.served = true, .interval = 5s});
  f.step.measure(false);
  CHECK(f.database.backlogs == 1);
  f.step.measure(false);
  CHECK(f.database.backlogs == 1);
  f.clock.advance(5s);
  f.step.measure(true);
  CHECK(f.database.backlogs == 1);
  f.step.measure(false);
  CHECK(f.database.backlogs == 2);
  CHECK(f.failures.empty());
}

TEST_CASE("BacklogStep measures nothing without /metrics or with the interval 0, until a reload turns it on",
          "[daemon][backlog_step]") {
  BacklogFixture f({.served = false, .interval = 5s});
  f.clock.advance(1min);
  f.step.measure(false);
  CHECK(f.database.backlogs == 0);
  CHECK_FALSE(f.timers.at(dispatch::Timer::backlog));
  f.step.set_settings({.served = true, .interval = 0ms});
  CHECK_FALSE(f.timers.at(dispatch::Timer::backlog));
  f.step.set_settings({.served = true, .interval = 2s});
  f.clock.advance(2s);
  f.step.measure(false);
  CHECK(f.database.backlogs == 1);
}

TEST_CASE("BacklogStep hands a failed measurement to the loop and measures again an interval later",
          "[daemon][backlog_step]") {
  BacklogFixture f({.served = true, .interval = 5s});
  f.database.fail_backlog = core::Error{core::ErrorKind::transient, "statement timeout"};
  f.step.measure(false);
  CHECK(f.failures == std::vector<std::string>{"statement timeout"});
  f.clock.advance(5s);
  f.step.measure(false);
  CHECK(f.database.backlogs == 2);
  CHECK(f.failures.size() == 1);
}

}  // namespace outboxd::daemon::test
