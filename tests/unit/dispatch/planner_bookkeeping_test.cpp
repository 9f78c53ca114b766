// Planner bookkeeping for its owner: which rows it knows, which it let go of, and its counters.
#include <catch2/catch.hpp>

#include <string>

#include "dispatch/planner.hpp"
#include "planner_fixture.hpp"

using namespace outboxd::dispatch::test;

namespace {

using outboxd::dispatch::HeldRow;

// What find() shows of a row: 'h' held with its payload, 'r' retired (its
// write pending, payload dropped), '-' not found.
char held_state(const PlannerFixture& f, outboxd::core::RowId id) {
  const HeldRow* held = f.planner.find(id);
  if (held == nullptr) return '-';
  REQUIRE(held->message.id == id);
  return held->message.body.empty() ? 'r' : 'h';
}

std::string states(const PlannerFixture& f) {
  std::string out;
  for (outboxd::core::RowId id = 1; id <= 7; ++id) out += held_state(f, id);
  return out;
}

}  // namespace

TEST_CASE("knows and find: the planner holds each payload until the row is settled", "[dispatch][planner]") {
  PlannerFixture f;
  auto rows = held({row(1, "A"), row(2, "B", 4), row(3, "B"), row(4, "", 0, 1), row(5, "", 0, 1),
                    row(6, "C", 0, 2), row(7, "C", 0, 2)});
  for (auto& r : rows) r.message.body = numbered("body-", r.message.id);
  REQUIRE(f.planner.add(std::move(rows)) == 7);
  CHECK(f.take() == Ids{1, 2, 4, 5, 6});
  for (outboxd::core::RowId id = 1; id <= 7; ++id) CHECK(f.planner.knows(id));
  CHECK_FALSE(f.planner.knows(99));
  CHECK(states(f) == "hhhhhhh");
  CHECK(f.planner.find(3)->message.body == "body-3");

  f.accept(1);
  CHECK(f.planner.knows(1));  // accepted, not yet persisted
  CHECK(states(f) == "rhhhhhh");

  f.reject(2, "bad");  // parked, and 3 with it
  CHECK(f.planner.knows(2));
  CHECK_FALSE(f.planner.knows(3));
  CHECK(states(f) == "rr-hhhh");

  f.planner.drop_partition(1);  // 4 and 5 are in flight: kept until their outcome
  CHECK(states(f) == "rr-hhhh");
  f.release(4);
  f.accept(5);
  CHECK(states(f) == "rr--rhh");
  CHECK_FALSE(f.planner.knows(4));

  f.planner.drop_partition(2);  // 7 is buffered: gone at once
  CHECK(states(f) == "rr--rh-");
  CHECK(f.planner.knows(6));

  f.planner.on_persisted();
  CHECK_FALSE(f.planner.knows(1));
  CHECK_FALSE(f.planner.knows(2));
  CHECK(states(f) == "-----h-");
}

TEST_CASE("Counters follow every outcome", "[dispatch][planner]") {
  PlannerFixture f;
  f.add({row(1, "A"), row(2, "B"), row(3, "C", 4), row(4, "D")});
  f.take();
  f.accept(1);
  f.reject(2);
  f.reject(3);  // parks
  f.release(4);
  f.clock.advance(100ms);
  f.take();
  f.lose(4);
  f.lose(42);
  const auto counters = f.planner.counters();
  CHECK(counters.published == 6);
  CHECK(counters.accepted == 1);
  CHECK(counters.rejected == 2);
  CHECK(counters.released == 1);
  CHECK(counters.unknown == 1);
  CHECK(counters.parked == 1);
  CHECK(counters.stale == 1);
}

TEST_CASE("set_policy: a smaller window holds new rows back, a larger one lets them go, backoff and room follow",
          "[dispatch][planner]") {
  PlannerFixture f;
  f.add({row(1), row(2), row(3), row(4), row(5)});
  auto policy = test_policy();
  policy.window = 2;
  policy.max_buffered = 4;
  policy.max_attempts = 1;
  f.planner.set_policy(policy);
  CHECK(f.take() == Ids{1, 2});
  CHECK(f.planner.claim_room() == 0);  // five known rows, room for four

  policy.window = 1;
  f.planner.set_policy(policy);
  f.accept(1);
  CHECK(f.take().empty());  // 2 still in flight: the window is full
  f.reject(2);
  REQUIRE(f.failures().size() == 1);
  CHECK(f.failures()[0].park);  // max_attempts 1: the first rejection parks

  policy.window = 10;
  policy.max_buffered = 100;
  f.planner.set_policy(policy);
  CHECK(f.take() == Ids{3, 4, 5});
  CHECK(f.planner.claim_room() > 0);
}
