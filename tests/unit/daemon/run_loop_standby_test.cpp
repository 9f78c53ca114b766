// The run loop with database.wait_for_standby: nothing is published before the standby has flushed past its claim.
#include <catch2/catch.hpp>

#include "loop_fixture.hpp"

namespace outboxd::daemon::test {
namespace {

using Status = FakeDatabase::Status;
using Mode = config::StandbyWait::Mode;

config::Config waiting_for(config::StandbyWait wait) {
  auto config = test_config();
  config.database.wait_for_standby = std::move(wait);
  return config;
}

// Turns the loop `turns` times (each sleep advances the clock by what the loop asked for).
void turn(LoopFixture& f, int turns) {
  for (int i = 0; i < turns; ++i) REQUIRE(f.loop.iterate());
}

}  // namespace

TEST_CASE("Run loop: waiting for the standby, no row is published until it has flushed past the claim",
          "[daemon][run_loop][standby]") {
  LoopFixture f(waiting_for({Mode::named, "replica1"}));
  const auto a = f.database.insert("s");
  const auto b = f.database.insert();
  f.database.standby_flushed = f.database.wal - 1;  // one byte short
  const auto start = f.clock.now();
  turn(f, 200);
  CHECK(f.broker.sent.empty());
  CHECK(f.database.standby_asked == std::optional<std::string>("replica1"));
  const auto& m = f.loop.metrics();
  CHECK(m.standby_waiting_rows.value() == 2);
  CHECK(m.claimed.value() == 0);  // the row book has not seen them
  CHECK(f.database.claims == 1);  // and no claim runs while one waits
  // Looked at with a growing interval: fewer reads than turns, no more than ten a second.
  const auto waited = std::chrono::duration<double>(f.clock.now() - start).count();
  CHECK(f.database.standby_reads < 10 * waited + 10);

  f.database.standby_flushed = f.database.wal;
  REQUIRE(f.turn_until([&] { return f.all(Status::dispatched); }));
  CHECK(f.broker.sent == std::vector<core::RowId>{a, b});
  CHECK(m.standby_waiting_rows.value() == 0);
  CHECK(m.standby_wait_seconds.count() == 1);
  CHECK(m.standby_wait_seconds.sum() >= waited - 0.2);
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: a standby that is already past the claim costs one read and no wait",
          "[daemon][run_loop][standby]") {
  LoopFixture f(waiting_for({Mode::any, {}}));
  f.database.insert();
  f.database.standby_flushed = 1'000'000;
  REQUIRE(f.turn_until([&] { return f.all(Status::dispatched); }));
  CHECK(f.database.standby_asked == std::nullopt);  // any standby
  CHECK(f.database.standby_reads == 1);
  CHECK(f.loop.metrics().standby_wait_seconds.count() == 1);
  CHECK(f.loop.metrics().standby_wait_seconds.sum() == 0);
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: without wait_for_standby the standby is never read", "[daemon][run_loop][standby]") {
  LoopFixture f;
  f.database.insert();
  REQUIRE(f.turn_until([&] { return f.all(Status::dispatched); }));
  CHECK(f.database.standby_reads == 0);
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: a claim waiting for the standby when the database connection drops is claimed again, and published once",
          "[daemon][run_loop][standby]") {
  LoopFixture f(waiting_for({Mode::any, {}}));
  const auto a = f.database.insert("s");
  turn(f, 5);
  REQUIRE(f.loop.metrics().standby_waiting_rows.value() == 1);
  f.database.lost(core::Error{core::ErrorKind::transient, "server closed the connection"});
  const auto claims = f.database.claims;
  turn(f, 20);  // reconnected: the old claim is dropped and the row claimed again, still waiting
  CHECK(f.database.claims > claims);
  CHECK(f.broker.sent.empty());
  f.database.standby_flushed = f.database.wal;
  REQUIRE(f.turn_until([&] { return f.all(Status::dispatched); }));
  CHECK(f.broker.sent == std::vector<core::RowId>{a});
  CHECK(f.stop() == 0);
}

}  // namespace outboxd::daemon::test
