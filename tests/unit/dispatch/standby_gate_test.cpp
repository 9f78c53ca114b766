// StandbyGate: a claim goes through once the standby has flushed past it; when to look again; when to warn.
#include <catch2/catch.hpp>

#include "dispatch/standby_gate.hpp"

using namespace std::chrono_literals;
using outboxd::core::ManualClock;
using outboxd::dispatch::WaitingClaim;
using outboxd::dispatch::StandbyGate;

namespace {

WaitingClaim claim_of(std::size_t rows, std::uint64_t pass = 0, std::vector<int> partitions = {0}) {
  WaitingClaim claim;
  claim.sets.immediate.rows.resize(rows);
  claim.pass = pass;
  claim.partitions = std::move(partitions);
  return claim;
}

StandbyGate gate() { return StandbyGate({1ms, 100ms, 5s}); }

}  // namespace

TEST_CASE("A standby already past the claim lets it through at once", "[dispatch][standby]") {
  ManualClock clock;
  auto g = gate();
  const auto cleared = g.wait(claim_of(3), 1000, 1000, clock.now());
  REQUIRE(cleared.has_value());
  CHECK(cleared->claim.rows() == 3);
  CHECK(cleared->waited == 0ms);
  CHECK_FALSE(g.waiting());
  CHECK_FALSE(g.next_check().has_value());
}

TEST_CASE("A claim waits until the standby has flushed the WAL position read after it", "[dispatch][standby]") {
  ManualClock clock;
  const auto t0 = clock.now();
  auto g = gate();
  CHECK_FALSE(g.wait(claim_of(2), 1000, 999, t0).has_value());  // one byte short is short
  CHECK(g.waiting());
  CHECK(g.waiting_rows() == 2);
  CHECK(g.next_check() == t0 + 1ms);
  CHECK_FALSE(g.check_due(t0));
  CHECK(g.check_due(t0 + 1ms));

  clock.advance(1ms);
  CHECK_FALSE(g.on_flushed(999, clock.now()).has_value());
  CHECK(g.next_check() == clock.now() + 2ms);  // doubling
  clock.advance(2ms);
  const auto cleared = g.on_flushed(1000, clock.now());
  REQUIRE(cleared.has_value());
  CHECK(cleared->waited == 3ms);
  CHECK_FALSE(cleared->reported);
  CHECK_FALSE(g.waiting());
}

TEST_CASE("No standby reporting keeps the claim waiting, looked at no more often than the longest interval",
          "[dispatch][standby]") {
  ManualClock clock;
  auto g = gate();
  CHECK_FALSE(g.wait(claim_of(1), 1000, std::nullopt, clock.now()).has_value());
  std::vector<std::chrono::milliseconds> intervals;
  for (int i = 0; i < 10; ++i) {
    const auto next = *g.next_check();
    intervals.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(next - clock.now()));
    clock.advance(next - clock.now());
    CHECK_FALSE(g.on_flushed(std::nullopt, clock.now()).has_value());
  }
  CHECK(intervals == std::vector<std::chrono::milliseconds>{1ms, 2ms, 4ms, 8ms, 16ms, 32ms, 64ms, 100ms, 100ms,
                                                            100ms});
  CHECK(g.waiting());
}

TEST_CASE("A wait of warn_after is reported once, with the lag when a standby reports, and its end says so",
          "[dispatch][standby]") {
  ManualClock clock;
  auto g = gate();
  CHECK_FALSE(g.wait(claim_of(4), 5000, std::nullopt, clock.now()).has_value());
  clock.advance(4999ms);
  CHECK_FALSE(g.overdue(clock.now()).has_value());
  CHECK_FALSE(g.stalled());
  clock.advance(1ms);
  auto late = g.overdue(clock.now());
  REQUIRE(late.has_value());
  CHECK(late->rows == 4);
  CHECK(late->waited == 5s);
  CHECK_FALSE(late->lag_bytes.has_value());  // no standby reports
  CHECK(g.stalled());
  CHECK_FALSE(g.overdue(clock.now() + 1h).has_value());  // once per wait

  clock.advance(1s);
  CHECK_FALSE(g.on_flushed(4000, clock.now()).has_value());
  const auto cleared = g.on_flushed(5000, clock.now() + 1ms);
  REQUIRE(cleared.has_value());
  CHECK(cleared->reported);
  CHECK_FALSE(g.stalled());

  // The next wait starts unreported; a reporting standby gives the lag.
  CHECK_FALSE(g.wait(claim_of(1), 9000, 8000, clock.now()).has_value());
  late = g.overdue(clock.now() + 5s);
  REQUIRE(late.has_value());
  CHECK(late->lag_bytes == 1000);
}

TEST_CASE("A claim from before a new pass or other leases is no longer current; clear() lets one through",
          "[dispatch][standby]") {
  ManualClock clock;
  auto g = gate();
  CHECK_FALSE(g.wait(claim_of(1, 7, {1, 2}), 10, 0, clock.now()).has_value());
  CHECK(g.current(7, {1, 2}));
  CHECK_FALSE(g.current(8, {1, 2}));
  CHECK_FALSE(g.current(7, {1}));
  g.drop();
  CHECK_FALSE(g.waiting());
  CHECK_FALSE(g.current(7, {1, 2}));
  CHECK_FALSE(g.clear(clock.now()).has_value());

  CHECK_FALSE(g.wait(claim_of(2), 10, 0, clock.now()).has_value());
  clock.advance(50ms);
  const auto cleared = g.clear(clock.now());
  REQUIRE(cleared.has_value());
  CHECK(cleared->claim.rows() == 2);
  CHECK(cleared->waited == 50ms);
}
