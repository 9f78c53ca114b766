// The whole run loop driven through its ports: fake outbox and broker, a manual clock, fixed randomness.
#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include <csignal>

#include "daemon/run/run_loop.hpp"
#include "loop_fixture.hpp"

namespace outboxd::daemon::test {
namespace {

using Status = FakeDatabase::Status;
using core::DeliveryOutcome;

}  // namespace

TEST_CASE("Run loop: claimed rows are published, accepted and marked dispatched", "[daemon][run_loop]") {
  LoopFixture f;
  const auto a = f.database.insert("s");
  const auto b = f.database.insert("s");
  const auto c = f.database.insert();
  REQUIRE(f.turn_until([&] { return f.all(Status::dispatched); }));
  CHECK(f.broker.sent == std::vector<core::RowId>{a, c, b});  // b waits for a's acceptance (strict order)
  const auto& m = f.loop.metrics();
  CHECK(m.claimed.value() == 3);
  CHECK(m.published.value() == 3);
  CHECK(m.accepted.value() == 3);
  CHECK(m.dispatched.value() == 3);
  CHECK(m.database_up.value() == 1);
  CHECK(m.broker_up.value() == 1);
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: the purge keeps dispatched rows keep_for (mode keep) and cancelled rows failed_keep_for",
          "[daemon][run_loop]") {
  using std::chrono::hours;
  using Kept = std::vector<std::chrono::milliseconds>;
  auto config = test_config();
  config.retention.keep_for = hours(48);
  config.retention.failed_keep_for = hours(2);
  // Mode delete deletes a row as it is marked: a dispatched row left over is purged at once.
  const auto [mode, dispatched_kept] = GENERATE(table<config::RetentionMode, Kept>(
      {{config::RetentionMode::keep, Kept{hours(48)}}, {config::RetentionMode::delete_rows, Kept{0ms}}}));
  config.retention.mode = mode;
  LoopFixture f(config);
  REQUIRE(f.turn_until([&] { return !f.database.purged_failed.empty(); }));
  CHECK(f.database.purged_dispatched == dispatched_kept);
  CHECK(f.database.purged_failed == Kept{hours(2)});
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: caught up, it arms NOTIFY, and a notified row is claimed without waiting for the poll",
          "[daemon][run_loop]") {
  auto config = test_config();
  config.dispatch.poll_interval = std::chrono::hours(1);
  LoopFixture f(config);
  f.database.insert();
  REQUIRE(f.turn_until([&] { return f.all(Status::dispatched) && f.database.armed; }));
  const auto before = f.clock.now();
  const auto id = f.database.insert();
  REQUIRE(f.turn_until([&] { return f.database.status(id) == Status::dispatched; }));
  CHECK(f.database.marked_at[id] - before < 100ms);  // not at the next poll
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: a row due centuries ahead costs nothing while it waits", "[daemon][run_loop]") {
  auto config = test_config();
  config.dispatch.poll_interval = std::chrono::hours(1);
  for (const auto wait : {std::chrono::milliseconds(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::years(300))),
                          std::chrono::milliseconds(9'222'521'847'121'565)}) {  // the largest timestamptz
    LoopFixture f(config);
    f.database.next_due = wait;
    f.database.insert();
    REQUIRE(f.turn_until([&] { return f.all(Status::dispatched) && f.database.armed; }));
    const auto claims = f.database.claims;
    const auto before = f.clock.now();
    for (int i = 0; i < 100; ++i) REQUIRE(f.loop.iterate());
    // Only the hourly poll claims; the loop slept between its timers.
    const auto polls = std::chrono::floor<std::chrono::hours>(f.clock.now() - before).count();
    CHECK(f.database.claims - claims <= polls + 1);
    CHECK(f.clock.now() - before > std::chrono::minutes(10));
    CHECK(f.stop() == 0);
  }
}

TEST_CASE("Run loop: a rejected row is retried after its backoff and parked at max_attempts",
          "[daemon][run_loop]") {
  LoopFixture f;
  f.broker.answer = [](const core::OutboxMessage&) { return DeliveryOutcome::rejected; };
  const auto id = f.database.insert("s");
  const auto later = f.database.insert("s");
  REQUIRE(f.turn_until([&] { return f.database.status(id) == Status::parked; }));
  CHECK(f.broker.times_sent(id) == 3);
  CHECK(f.broker.times_sent(later) == 0);  // its session is parked behind it
  CHECK(f.database.attempts[id] == 3);
  const auto& m = f.loop.metrics();
  CHECK(m.rejected.value() == 3);
  CHECK(m.retried.value() == 2);
  CHECK(m.parked.value() == 1);
  CHECK(m.dispatched.value() == 0);
  CHECK(f.database.status(later) == Status::pending);
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: a writer's failing row blocks its own rows of the session id, never another writer's",
          "[daemon][run_loop]") {
  LoopFixture f;
  const auto a1 = f.database.insert("order-42", 0, "app_a");
  const auto a2 = f.database.insert("order-42", 0, "app_a");
  const auto b1 = f.database.insert("order-42", 0, "app_b");
  const auto b2 = f.database.insert("order-42", 0, "app_b");
  f.broker.answer = [a1](const core::OutboxMessage& row) {
    return row.id == a1 ? DeliveryOutcome::rejected : DeliveryOutcome::accepted;
  };
  REQUIRE(f.turn_until([&] { return f.database.status(a1) == Status::parked; }));
  // b1 went out beside a1's first attempt, not after its park.
  CHECK(f.broker.sent == std::vector<core::RowId>{a1, b1, b2, a1, a1});
  CHECK(f.database.status(b1) == Status::dispatched);
  CHECK(f.database.status(b2) == Status::dispatched);
  CHECK(f.broker.times_sent(a2) == 0);
  CHECK(f.database.status(a2) == Status::pending);
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: a row that cannot be made into a message is parked at once", "[daemon][run_loop]") {
  LoopFixture f;
  f.broker.answer = [](const core::OutboxMessage&) { return DeliveryOutcome::unsendable; };
  const auto id = f.database.insert();
  REQUIRE(f.turn_until([&] { return f.database.status(id) == Status::parked; }));
  CHECK(f.broker.times_sent(id) == 1);
  CHECK(f.loop.metrics().unsendable.value() == 1);
  CHECK(f.loop.metrics().rejected.value() == 0);
  CHECK(f.loop.metrics().parked.value() == 1);
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: a lease lost mid-batch drops the buffered rows and its marks are fenced off",
          "[daemon][run_loop]") {
  auto config = test_config();
  config.dispatch.in_flight = 2;
  LoopFixture f(config);
  f.broker.silent = true;
  for (int i = 0; i < 4; ++i) f.database.insert();
  REQUIRE(f.turn_until([&] { return f.broker.sent.size() == 2; }));
  f.broker.silent = false;
  f.database.take_over(0, "other-instance");
  REQUIRE(f.turn_until([&] { return f.loop.metrics().partitions.value() == 0; }));
  f.broker.answer_all(DeliveryOutcome::accepted);
  REQUIRE(f.turn_until([&] { return f.loop.metrics().accepted.value() == 2; }));
  f.loop.iterate();
  CHECK(f.broker.sent.size() == 2);  // the two buffered rows were never published
  // The loop marked its two rows as the owner it is; the statement's fence,
  // keyed on that owner, left them to the partition's new owner.
  CHECK(f.database.marks == std::vector<FakeDatabase::Mark>{{{1, 2}, "test-instance"}});
  CHECK(f.all(Status::pending));
  CHECK(f.loop.metrics().buffered.value() == 0);
  CHECK(f.loop.metrics().dispatched.value() == 0);  // accepted, but not marked: not dispatched
  f.database.leased = {0};  // the partition comes back: every row goes out again, none is lost
  REQUIRE(f.turn_until([&] { return f.all(Status::dispatched); }));
  for (const auto& [id, row] : f.database.table) CHECK(f.broker.times_sent(id) == (id <= 2 ? 2 : 1));
  CHECK(f.loop.metrics().dispatched.value() == 4);
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: a partition over the share is handed back once its rows in flight are marked",
          "[daemon][run_loop]") {
  LoopFixture f;
  f.database.leased = {0, 1};
  f.broker.silent = true;
  const auto kept = f.database.insert(std::nullopt, 0);
  const auto draining = f.database.insert(std::nullopt, 1);
  REQUIRE(f.turn_until([&] { return f.broker.sent.size() == 2; }));
  f.database.over_share = {1};  // another instance joined: partition 1 is to be handed over
  f.clock.advance(10s);         // renew_interval
  REQUIRE(f.turn_until([&] { return f.loop.metrics().partitions.value() == 1; }));
  const auto later = f.database.insert(std::nullopt, 1);
  for (int i = 0; i < 5; ++i) f.loop.iterate();
  CHECK(f.database.handed_back.empty());  // its row is still in flight
  CHECK(f.broker.times_sent(later) == 0);  // draining: no new rows claimed
  f.broker.answer_all(DeliveryOutcome::accepted);
  REQUIRE(f.turn_until([&] { return !f.database.handed_back.empty(); }));
  CHECK(f.database.handed_back == std::vector<int>{1});
  CHECK(f.database.status(kept) == Status::dispatched);
  CHECK(f.database.status(draining) == Status::dispatched);  // marked before the hand-back
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: a database error mid-pipeline reconnects and persists what was decided, publishing nothing twice",
          "[daemon][run_loop]") {
  LoopFixture f;
  const auto a = f.database.insert("s");
  const auto b = f.database.insert("s");
  f.database.fail_mark = core::transient_error("connection reset");
  REQUIRE(f.turn_until([&] { return f.all(Status::dispatched); }));
  CHECK(f.database.losses == 1);
  CHECK(f.loop.metrics().database_lost.value() == 1);
  CHECK(f.broker.times_sent(a) == 1);
  CHECK(f.broker.times_sent(b) == 1);
  f.database.fail_claim = core::transient_error("server closed the connection");
  const auto c = f.database.insert();
  REQUIRE(f.turn_until([&] { return f.database.status(c) == Status::dispatched; }));
  CHECK(f.database.losses == 2);
  CHECK(f.broker.times_sent(c) == 1);
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: SIGTERM waits for outstanding outcomes, persists them and hands back the leases",
          "[daemon][run_loop]") {
  LoopFixture f;
  f.broker.silent = true;
  const auto id = f.database.insert();
  REQUIRE(f.turn_until([&] { return f.broker.sent.size() == 1; }));
  f.events.signals.push_back(SIGTERM);
  CHECK(f.loop.iterate());  // still waiting for the outcome
  f.broker.answer_all(DeliveryOutcome::accepted);
  int turns = 0;
  while (f.loop.iterate() && ++turns < 100) {
  }
  CHECK(f.loop.finish() == 0);
  CHECK(f.database.status(id) == Status::dispatched);
  CHECK(f.database.handed_back_all);
  CHECK(f.database.deregistered);
  CHECK(f.broker.stopped);
}

TEST_CASE("Run loop: past shutdown_timeout it exits 0 and leaves unconfirmed rows pending", "[daemon][run_loop]") {
  LoopFixture f;
  f.broker.silent = true;
  const auto id = f.database.insert();
  REQUIRE(f.turn_until([&] { return f.broker.sent.size() == 1; }));
  const auto stopped_at = f.clock.now();
  CHECK(f.stop() == 0);
  CHECK(f.clock.now() - stopped_at >= 2s);
  CHECK(f.database.status(id) == Status::pending);
}

TEST_CASE("Run loop: a mark refused for a missing privilege ends the loop with exit code 78, publishing no more",
          "[daemon][run_loop]") {
  auto config = test_config();
  config.dispatch.batch_size = 2;  // the two outcomes make a full batch: marked in the turn they arrive
  LoopFixture f(config);
  f.broker.silent = true;
  const auto a = f.database.insert("s");
  const auto b = f.database.insert();
  REQUIRE(f.turn_until([&] { return f.broker.sent.size() == 2; }));
  f.database.fail_mark = core::Error{core::ErrorKind::forbidden, "permission denied for table messages"};
  f.broker.answer_all(DeliveryOutcome::accepted);
  const auto c = f.database.insert();
  int turns = 0;
  while (f.loop.iterate() && ++turns < 100) {
  }
  CHECK(f.loop.finish() == 78);
  CHECK(f.database.status(a) == Status::pending);
  CHECK(f.database.status(b) == Status::pending);
  CHECK(f.broker.times_sent(c) == 0);
}

TEST_CASE("Run loop: a fatal database error ends the loop with exit code 1", "[daemon][run_loop]") {
  LoopFixture f;
  f.database.connect_error = core::fatal_error("password authentication failed");
  CHECK_FALSE(f.loop.iterate());
  CHECK(f.loop.finish() == 1);
}

}  // namespace outboxd::daemon::test
