// Reporting on its own: the gauges and health each turn, the stats line's timer, its interval reloaded.
#include <catch2/catch.hpp>

#include "daemon/run/reporting.hpp"
#include "parts_fixture.hpp"

namespace outboxd::daemon::test {
namespace {

struct ReportingFixture : WiredParts {
  explicit ReportingFixture(std::chrono::milliseconds stats_interval = 10s)
      : reporting({.listen = "", .poll_interval = 30s, .stats_interval = stats_interval}, registry,
                  {book, database, leases, publisher, claims, decisions}, metrics, timers, clock) {}

  Reporting reporting;
};

}  // namespace

TEST_CASE("Reporting sets the connection and window gauges each turn", "[daemon][reporting]") {
  ReportingFixture f;
  REQUIRE(f.reporting.start());
  f.reporting.report(false);
  CHECK(f.metrics.database_up.value() == 1);
  CHECK(f.metrics.broker_up.value() == 0);
  CHECK(f.metrics.partitions.value() == static_cast<std::int64_t>(f.leases.partitions().size()));
  for (int i = 0; i < 4; ++i) f.database.insert();
  f.claims.claim(false);
  REQUIRE(f.publisher.start());
  f.publisher.take_outcomes();
  f.broker.silent = true;
  f.publisher.publish_ready(false);
  f.reporting.report(false);
  CHECK(f.metrics.broker_up.value() == 1);
  CHECK(f.metrics.in_flight.value() == 4);
  CHECK(f.metrics.buffered.value() == 0);
}

TEST_CASE("Reporting's stats line comes every stats interval; 0 turns it off, a reload on again",
          "[daemon][reporting]") {
  ReportingFixture f;
  REQUIRE(f.reporting.start());
  REQUIRE(f.timers.at(dispatch::Timer::stats) == f.clock.now() + 10s);
  f.clock.advance(10s);
  f.reporting.log_stats(false);
  CHECK(f.timers.at(dispatch::Timer::stats) == f.clock.now() + 10s);
  f.reporting.set_settings({.listen = "", .poll_interval = 30s, .stats_interval = 0ms});
  CHECK_FALSE(f.timers.at(dispatch::Timer::stats));
  f.reporting.set_settings({.listen = "", .poll_interval = 30s, .stats_interval = 2s});
  CHECK(f.timers.at(dispatch::Timer::stats) == f.clock.now() + 2s);
}

}  // namespace outboxd::daemon::test
