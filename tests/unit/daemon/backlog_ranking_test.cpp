// Unit tests of BacklogRanking: when the backlog measurement ranks, and what holds between rankings.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "daemon/run/backlog_ranking.hpp"

using namespace outboxd;
using namespace std::chrono_literals;
using daemon::BacklogRanking;

namespace {

const core::SteadyTime t0{std::chrono::hours(1)};

// A report listing `names` (due 1 each); beyond the bound when left_out > 0, as a ranking reports.
pg::BacklogReport report(const std::vector<std::string>& names, std::int64_t left_out = 0) {
  pg::BacklogReport r;
  for (const auto& name : names) {
    pg::DestinationBacklog d;
    d.destination = name;
    d.due = 1;
    r.destinations.push_back(d);
  }
  r.left_out = left_out;
  r.beyond_bound = left_out > 0;
  return r;
}

// A measurement of chosen destinations: beyond the bound or not, nothing counted left out.
pg::BacklogReport between_report(const std::vector<std::string>& names, bool beyond_bound) {
  auto r = report(names);
  r.beyond_bound = beyond_bound;
  return r;
}

}  // namespace

TEST_CASE("BacklogRanking: the first measurement ranks, and every one while the destinations fit",
          "[daemon][backlog_ranking]") {
  BacklogRanking ranking;
  CHECK(ranking.due(t0));
  const auto published = ranking.ranked(report({"a", "b"}), t0);
  CHECK(published.destinations.size() == 2);
  CHECK(published.left_out == 0);
  CHECK(ranking.due(t0 + 5s));
  CHECK(ranking.chosen().empty());
}

TEST_CASE("BacklogRanking: past the bound, a ranking's choice and count hold until a period has passed",
          "[daemon][backlog_ranking]") {
  BacklogRanking ranking;
  ranking.ranked(report({"orders", "z-old"}, 7), t0);
  CHECK(ranking.chosen() == std::vector<std::string>{"orders", "z-old"});

  for (auto at = t0 + 5s; at < t0 + BacklogRanking::kPeriod; at += 5s) {
    REQUIRE_FALSE(ranking.due(at));
    auto measured = between_report({"orders", "z-old"}, true);
    measured.destinations[0].due = 40;  // the chosen destinations' figures are the measurement's own
    const auto published = ranking.between(measured);
    CHECK(published.destinations[0].due == 40);
    CHECK(published.left_out == 7);  // not counted in between: the ranking's count
  }
  CHECK_FALSE(ranking.due(t0 + BacklogRanking::kPeriod - 1ms));
  CHECK(ranking.due(t0 + BacklogRanking::kPeriod));
  CHECK(ranking.chosen() == std::vector<std::string>{"orders", "z-old"});  // until the next ranking

  SECTION("the next ranking's choice and count replace them") {
    ranking.ranked(report({"big", "orders"}, 3), t0 + 61s);
    CHECK(ranking.chosen() == std::vector<std::string>{"big", "orders"});
    CHECK_FALSE(ranking.due(t0 + 61s + BacklogRanking::kPeriod - 1ms));
    CHECK(ranking.between(between_report({"big", "orders"}, true)).left_out == 3);
  }
  SECTION("a ranking that leaves none out keeps nothing") {
    ranking.ranked(report({"orders"}), t0 + 61s);
    CHECK(ranking.chosen().empty());
    CHECK(ranking.due(t0 + 62s));
  }
}

TEST_CASE("BacklogRanking: once every destination fits again, the choice goes and the next measurement ranks",
          "[daemon][backlog_ranking]") {
  BacklogRanking ranking;
  ranking.ranked(report({"orders", "z-old"}, 7), t0);
  // backlog_of lists every destination then, the chosen ones or not, and none is left out.
  const auto published = ranking.between(between_report({"audit"}, false));
  CHECK(published.left_out == 0);
  REQUIRE(published.destinations.size() == 1);
  CHECK(published.destinations[0].destination == "audit");
  CHECK(ranking.chosen().empty());
  CHECK(ranking.due(t0 + 5s));
}
