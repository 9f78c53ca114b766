// StatisticsWatch: a pass that read more rows than the planner's statistics count has them refreshed, once a minute at most.
#include <catch2/catch.hpp>

#include "dispatch/statistics_watch.hpp"

using outboxd::dispatch::StatisticsWatch;
using std::chrono::seconds;

TEST_CASE("Statistics that count fewer rows than a pass read are stale", "[statistics_watch]") {
  StatisticsWatch watch;
  const outboxd::core::SteadyTime t0{};
  CHECK_FALSE(watch.stale(1000, 1000, t0));
  CHECK_FALSE(watch.stale(1000, std::nullopt, t0));
  CHECK_FALSE(watch.stale(1000, -1, t0));  // never analyzed: the planner goes by the table's size
  CHECK(watch.stale(1000, 0, t0));
}

TEST_CASE("Statistics are refreshed once per interval at most", "[statistics_watch]") {
  StatisticsWatch watch;
  const outboxd::core::SteadyTime t0{};
  REQUIRE(watch.stale(1000, 0, t0));
  CHECK_FALSE(watch.stale(2000, 0, t0 + StatisticsWatch::kMinInterval - seconds(1)));
  CHECK(watch.stale(2000, 0, t0 + StatisticsWatch::kMinInterval));
}
