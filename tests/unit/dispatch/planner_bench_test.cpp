// Planner throughput: 1M rows through add, take_ready, on_outcome and on_persisted (hidden: run with "[.bench]").
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "dispatch/planner.hpp"
#include "planner_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using outboxd::core::DeliveryOutcome;
using outboxd::core::RowId;
using outboxd::dispatch::Planner;
using outboxd::dispatch::PlannerPolicy;
using outboxd::dispatch::test::RowRef;
using outboxd::dispatch::test::numbered;

constexpr RowId kRows = 1'000'000;

// Runs the loop the daemon runs, with a broker that accepts everything at
// once; every tenth iteration one row in fifty is released instead.
void run(const char* label, std::size_t sessions) {
  PlannerPolicy policy;
  policy.window = 1000;
  policy.per_session_in_flight = 1;
  policy.max_buffered = 10'000;
  policy.release_retry = 0ms;
  outboxd::core::SteadyClock clock;
  outboxd::core::FastRandom random(7);
  Planner planner(policy, clock, random);

  std::vector<std::string> names;
  for (std::size_t s = 0; s < std::min<std::size_t>(sessions, kRows); ++s) names.push_back(numbered("order-", s));

  std::vector<RowRef> batch;
  RowId next = 1;
  std::uint64_t iterations = 0;
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  while (planner.counters().accepted < static_cast<std::uint64_t>(kRows)) {
    batch.clear();
    const std::size_t room = std::min<std::size_t>(planner.claim_room(), 2000);
    for (std::size_t i = 0; i < room && next <= kRows; ++i, ++next) {
      batch.push_back({next, names.empty() ? std::string() : names[static_cast<std::size_t>(next) % names.size()], 0, 0, std::nullopt, ""});
    }
    planner.add(outboxd::dispatch::test::held(batch));
    std::size_t n = 0;
    for (const RowId id : planner.take_ready()) {
      const bool release = iterations % 10 == 0 && ++n % 50 == 0;
      planner.on_outcome(id, release ? DeliveryOutcome::released : DeliveryOutcome::accepted, "");
    }
    planner.on_persisted();
    ++iterations;
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  // CPU time too: on a busy machine the wall-clock rate says more about the neighbours.
  const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const auto counters = planner.counters();
  std::printf("planner %-22s %6.0f k rows/s wall, %6.0f k rows/s cpu (%llu published, %llu released, %llu iterations)\n",
              label, static_cast<double>(kRows) / took.count() / 1000.0, static_cast<double>(kRows) / cpu / 1000.0,
              static_cast<unsigned long long>(counters.published), static_cast<unsigned long long>(counters.released),
              static_cast<unsigned long long>(iterations));
  REQUIRE(counters.accepted == static_cast<std::uint64_t>(kRows));
  REQUIRE(planner.in_flight() == 0);
}

}  // namespace

TEST_CASE("Planner throughput, 1M rows", "[.bench]") {
  run("10k sessions, strict", 10'000);
  run("a session per row", static_cast<std::size_t>(kRows));
  run("no session", 0);
}
