// The planner and the claim merge with bytes: rows the claim found unsendable, and the byte budgets.
#include <catch2/catch.hpp>

#include "dispatch/claim_merge.hpp"
#include "dispatch/planner.hpp"
#include "planner_fixture.hpp"

namespace outboxd::dispatch::test {
namespace {

HeldRow sized(RowRef ref, std::size_t body_bytes) {
  HeldRow row = held({std::move(ref)}).front();
  row.message.body.assign(body_bytes, 'x');
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

}  // namespace outboxd::dispatch::test
