// The planner and the claim merge with bytes: rows the claim found unsendable, and the byte budgets.
#include <catch2/catch.hpp>

#include "dispatch/claim_merge.hpp"
#include "dispatch/planner.hpp"
#include "dispatch/row_book.hpp"
#include "planner_fixture.hpp"

namespace outboxd::dispatch::test {
namespace {

HeldRow sized(RowRef ref, std::size_t body_bytes) {
  HeldRow row = held({std::move(ref)}).front();
  row.message.body = std::string(body_bytes, 'x');
  return row;
}

HeldRow unsendable(RowRef ref) {
  HeldRow row = held({std::move(ref)}).front();
  row.message.unsendable = "message too large";
  return row;
}

}  // namespace

TEST_CASE("A row the claim found unsendable is parked when its turn comes, never handed out",
          "[dispatch][planner][bytes]") {
  PlannerFixture f;
  std::vector<HeldRow> rows;
  rows.push_back(sized(row(1, "A"), 10));
  rows.push_back(unsendable(row(2, "A", 3)));
  rows.push_back(sized(row(3, "A"), 10));
  rows.push_back(sized(row(4, "B"), 10));
  rows.push_back(unsendable(row(5)));
  REQUIRE(f.planner.add(std::move(rows)) == 5);
  CHECK(f.take() == Ids{1, 4});  // 5 is parked at once; 2 waits for 1
  REQUIRE(f.failures().size() == 1);
  CHECK(f.failures()[0].id == 5);
  CHECK(f.failures()[0].park);
  f.accept(1);
  CHECK(f.take().empty());  // 2 parked in its turn, 3 with it
  REQUIRE(f.failures().size() == 2);
  CHECK(f.failures()[1].id == 2);
  CHECK(f.failures()[1].park);
  CHECK(f.failures()[1].attempts == 4);
  CHECK(f.failures()[1].error == "message too large");
  CHECK_FALSE(f.planner.knows(3));
  CHECK(f.planner.counters().published == 2);
  CHECK(f.planner.counters().unsendable == 2);
  CHECK(f.planner.counters().parked == 2);
  f.accept(4);
  CHECK(f.take().empty());
}

TEST_CASE("merge_claim: a statement cut by its byte budget is full, and scheduled rows above its cut wait",
          "[dispatch][claim][bytes]") {
  core::ClaimedSets sets;
  sets.immediate.rows.resize(2);
  sets.immediate.rows[0].id = 10;
  sets.immediate.rows[1].id = 20;
  sets.immediate.read = 2;
  sets.immediate.last_id = 20;
  sets.immediate.budget_used = true;
  sets.scheduled.rows.resize(2);
  sets.scheduled.rows[0].id = 15;
  sets.scheduled.rows[1].id = 25;
  sets.scheduled.read = 2;
  const auto claim = merge_claim(std::move(sets), 100);
  CHECK(claim.immediate_full);
  CHECK_FALSE(claim.scheduled_full);
  CHECK(claim.more());
  REQUIRE(claim.rows.size() == 3);
  CHECK(claim.rows[2].id == 20);
  CHECK(claim.last_immediate_id == 20);
}

TEST_CASE("The in-flight bytes admit rows while they fit, and one row alone however large",
          "[dispatch][planner][bytes]") {
  auto policy = test_policy();
  policy.in_flight_bytes = 100;
  PlannerFixture f(policy);
  std::vector<HeldRow> rows;
  rows.push_back(sized(row(1, "A"), 38));  // 40 bytes with its headers "{}"
  rows.push_back(sized(row(2, "B"), 48));  // 50
  rows.push_back(sized(row(3, "C"), 18));  // 20: would fit, but goes out only after 2
  rows.push_back(sized(row(4, "D"), 298)); // 300: over the budget
  REQUIRE(f.planner.add(std::move(rows)) == 4);
  CHECK(f.planner.held_bytes() == 410);
  CHECK(f.take() == Ids{1, 2});
  CHECK(f.planner.in_flight_bytes() == 90);
  f.accept(1);
  CHECK(f.take() == Ids{3});
  f.accept(2);
  f.accept(3);
  CHECK(f.planner.in_flight_bytes() == 0);
  CHECK(f.take() == Ids{4});  // alone
  CHECK(f.planner.in_flight_bytes() == 300);
  CHECK(f.planner.byte_room() == 0);
  f.reject(4);
  CHECK(f.planner.in_flight_bytes() == 0);
  CHECK(f.planner.held_bytes() == 300);  // waiting for its retry
  f.clock.advance(100ms);
  CHECK(f.take() == Ids{4});
  f.accept(4);
  f.planner.on_persisted();
  CHECK(f.planner.held_bytes() == 0);
  CHECK(f.planner.byte_room() == 100);
}

TEST_CASE("RowBook: a claim asks for no more bytes than the budgets leave, and none once they are used",
          "[dispatch][row_book][bytes]") {
  core::ManualClock clock;
  core::FixedRandom random{0.5};
  auto policy = test_policy();
  policy.in_flight_bytes = 1000;
  RowBook book(policy, clock, random);
  CHECK(book.claim_request(10, 600).statement_bytes == 300);  // half for each statement
  CHECK(book.claim_request(10, 5000).statement_bytes == 500);  // the in-flight bytes are the lower
  core::ClaimedSets sets;
  sets.immediate.rows.resize(1);
  sets.immediate.rows[0].id = 1;
  sets.immediate.rows[0].body = std::string(798, 'x');  // 800 with "{}"
  sets.immediate.read = 1;
  sets.immediate.last_id = 1;
  const auto request = book.claim_request(10, 600);
  book.on_claim(std::move(sets), request, clock.now());
  CHECK(book.held_bytes() == 800);
  CHECK(book.room_for_claim(10));
  CHECK(book.claim_request(10, 600).statement_bytes == 100);  // 200 left
  core::ClaimedSets more;
  more.immediate.rows.resize(1);
  more.immediate.rows[0].id = 2;
  more.immediate.rows[0].body = std::string(298, 'x');
  more.immediate.read = 1;
  more.immediate.last_id = 2;
  book.on_claim(std::move(more), book.claim_request(10, 600), clock.now());
  CHECK(book.held_bytes() == 1100);
  CHECK_FALSE(book.room_for_claim(10));
  CHECK(book.claim_request(10, 600).statement_bytes == 1);  // at least one row, if asked
}

}  // namespace outboxd::dispatch::test
