// The run loop as one outbox of many: quiescent once idle and armed, stopped on request like SIGTERM.
#include "loop_fixture.hpp"

namespace outboxd::daemon::test {
namespace {

using core::DeliveryOutcome;
using Status = FakeDatabase::Status;

TEST_CASE("Tenant loop: quiescent only once nothing is held or in flight and writers NOTIFY it",
          "[daemon][run_loop][tenants]") {
  auto config = test_config();
  config.dispatch.poll_interval = std::chrono::hours(1);  // a poll would make the next claim worth its trip
  LoopFixture f(config);
  CHECK_FALSE(f.loop.quiescent());  // not connected, nothing claimed yet
  f.broker.silent = true;
  const auto id = f.database.insert();
  REQUIRE(f.turn_until([&] { return f.broker.sent.size() == 1; }));
  CHECK_FALSE(f.loop.quiescent());  // in flight
  // Caught up and armed while the outcome is awaited: still not to be let go.
  REQUIRE(f.turn_until([&] { return f.database.armed; }));
  for (int i = 0; i < 5; ++i) f.loop.iterate();
  CHECK_FALSE(f.loop.quiescent());
  f.broker.answer_all(DeliveryOutcome::accepted);
  REQUIRE(f.turn_until([&] { return f.database.status(id) == Status::dispatched && f.database.armed; }));
  CHECK(f.turn_until([&] { return f.loop.quiescent(); }));  // after the claim that follows the arming
  f.database.insert();  // a NOTIFY: a claim may find rows
  f.loop.iterate();
  CHECK_FALSE(f.loop.quiescent());
  CHECK(f.stop() == 0);
}

TEST_CASE("Tenant loop: a turn that leaves it quiescent returns before its sleep when asked to",
          "[daemon][run_loop][tenants]") {
  auto config = test_config();
  config.dispatch.poll_interval = std::chrono::hours(1);
  LoopFixture f(config);
  const auto id = f.database.insert();
  REQUIRE(f.turn_until([&] { return f.database.status(id) == Status::dispatched && f.loop.quiescent(); }));
  const int sleeps = f.events.sleeps;
  CHECK(f.loop.iterate(true));
  CHECK(f.events.sleeps == sleeps);
  CHECK(f.loop.iterate(false));
  CHECK(f.events.sleeps == sleeps + 1);
  // claim_again: not quiescent until a claim has looked once more.
  const auto claims = f.database.claims;
  f.loop.claim_again();
  CHECK_FALSE(f.loop.quiescent());
  CHECK(f.turn_until([&] { return f.loop.quiescent(); }));
  CHECK(f.database.claims > claims);
  CHECK(f.stop() == 0);
}

TEST_CASE("Tenant loop: request_stop waits for the outcomes in flight, marks them and hands back the leases",
          "[daemon][run_loop][tenants]") {
  LoopFixture f;
  f.broker.silent = true;
  const auto id = f.database.insert();
  REQUIRE(f.turn_until([&] { return f.broker.sent.size() == 1; }));
  f.loop.request_stop();
  CHECK_FALSE(f.loop.quiescent());
  CHECK(f.loop.iterate());  // still waiting for the outcome
  f.broker.answer_all(DeliveryOutcome::accepted);
  int turns = 0;
  while (f.loop.iterate() && ++turns < 100) {
  }
  CHECK(f.loop.finish() == 0);
  CHECK(f.database.status(id) == Status::dispatched);
  CHECK(f.database.handed_back_all);
  CHECK(f.database.deregistered);
  CHECK(f.loop.totals().dispatched == 1);
}

}  // namespace
}  // namespace outboxd::daemon::test
