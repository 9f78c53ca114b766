// The run loop's byte bounds: the largest message, the claim and in-flight budgets, libpq out of memory.
#include <catch2/catch.hpp>

#include "loop_fixture.hpp"
#include "pg/sqlstate.hpp"

namespace outboxd::daemon::test {
namespace {

using Status = FakeDatabase::Status;

core::RowId insert_sized(FakeDatabase& database, std::optional<std::string> session, std::size_t body_bytes) {
  const auto id = database.insert(std::move(session));
  database.table.at(id).message.body = std::string(body_bytes, 'x');
  return id;
}

}  // namespace

// The claim finds a row too large and says why (claim_bytes_test holds the
// real claim to its sizes and limit); the loop parks it with that reason.
TEST_CASE("Run loop: a row the claim finds over the largest message is parked at once with the claim's reason, "
          "never sent, and other sessions flow", "[daemon][run_loop][bytes]") {
  auto config = test_config();
  config.dispatch.max_message_bytes = 1000;
  LoopFixture f(config);
  const std::string reason = "message too large: its body and headers take 2002 bytes";
  const auto big = insert_sized(f.database, "a", 2000);
  f.database.table.at(big).message.unsendable = reason;
  const auto after_big = insert_sized(f.database, "a", 10);
  const auto b1 = insert_sized(f.database, "b", 998);
  const auto b2 = insert_sized(f.database, "b", 10);
  REQUIRE(f.turn_until([&] {
    return f.database.status(big) == Status::parked && f.database.status(b2) == Status::dispatched;
  }));
  CHECK(f.database.last_claim_bytes.max_message == 1000);
  CHECK(f.broker.times_sent(big) == 0);
  CHECK(f.broker.times_sent(after_big) == 0);  // behind a parked row of its session
  CHECK(f.database.status(after_big) == Status::pending);
  CHECK(f.database.status(b1) == Status::dispatched);
  CHECK(f.database.table.at(big).last_error == reason);
  CHECK(f.database.attempts.at(big) == 1);
  CHECK(f.loop.metrics().parked.value() == 1);
  CHECK(f.loop.metrics().unsendable.value() == 1);
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: an oversize row alone is parked without waiting for another outcome", "[daemon][run_loop][bytes]") {
  LoopFixture f;
  const auto big = insert_sized(f.database, std::nullopt, 5000);
  f.database.table.at(big).message.unsendable = "message too large";
  REQUIRE(f.turn_until([&] { return f.database.status(big) == Status::parked; }));
  CHECK(f.broker.sent.empty());
}

TEST_CASE("Run loop: without dispatch.max_message_bytes the broker profile's limit applies", "[daemon][run_loop][bytes]") {
  auto config = test_config();
  config.broker.profile = config::BrokerProfile::azure_servicebus;
  LoopFixture f(config);
  f.database.insert();
  REQUIRE(f.turn_until([&] { return f.all(Status::dispatched); }));
  CHECK(f.database.last_claim_bytes.max_message == 256 * 1024);
  config.dispatch.max_message_bytes = 4096;
  CHECK(config::max_message_bytes(config) == 4096);
  config.broker.profile = config::BrokerProfile::rabbitmq;
  config.dispatch.max_message_bytes = 0;
  CHECK(config::max_message_bytes(config) == 134217728);
}

TEST_CASE("Run loop: the byte budgets bound each claim and the rows held and in flight", "[daemon][run_loop][bytes]") {
  auto config = test_config();
  config.dispatch.claim_bytes = 1000;
  config.dispatch.in_flight_bytes = 1000;
  LoopFixture f(config);
  f.broker.silent = true;
  std::vector<core::RowId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(insert_sized(f.database, "s" + std::to_string(i), 398));  // 400 each
  // One claim reads rows while under 500 bytes: 2 rows; the next, with 200 bytes left, 1 row; then none.
  REQUIRE(f.turn_until([&] { return f.broker.unanswered.size() == 2; }));
  for (int i = 0; i < 20; ++i) f.loop.iterate();
  CHECK(f.broker.unanswered.size() == 2);  // a third would take 1200 bytes in flight
  CHECK(f.database.claims == 2);    // and 1200 bytes held: no more claims
  CHECK(f.database.last_claim_bytes.budget == 100);
  f.broker.answer_all(core::DeliveryOutcome::accepted);
  f.broker.silent = false;
  REQUIRE(f.turn_until([&] { return f.all(Status::dispatched); }));
  for (const auto id : ids) CHECK(f.broker.times_sent(id) == 1);
  CHECK(f.stop() == 0);
}

TEST_CASE("Run loop: libpq out of memory on a claim reconnects and claims again, it does not exit",
          "[daemon][run_loop][bytes]") {
  LoopFixture f;
  const auto a = f.database.insert("s");
  f.database.fail_claim = pg::make_failure("", "claiming rows: out of memory for query result", false, false).to_error();
  REQUIRE(f.turn_until([&] { return f.database.status(a) == Status::dispatched; }));
  CHECK(f.database.losses == 1);
  CHECK(f.loop.metrics().database_lost.value() == 1);
  CHECK(f.database.claims >= 2);
  CHECK(f.stop() == 0);
}

}  // namespace outboxd::daemon::test
