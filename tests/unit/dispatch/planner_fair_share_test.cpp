// Fair share between destinations: a backlog buffered in memory does not stall another destination's rows.
#include <catch2/catch.hpp>

#include "planner_fixture.hpp"

namespace outboxd::dispatch::test {

TEST_CASE("A row of another destination goes out next, ahead of the backlog held before it",
          "[dispatch][planner][fair]") {
  auto policy = test_policy();
  policy.window = 2;
  PlannerFixture f(policy);
  for (core::RowId id = 1; id <= 10; ++id) f.add({to("bulk", id)});
  CHECK(f.take() == Ids{1, 2});
  f.add({to("payments", 11)});
  f.accept(1);
  f.accept(2);
  // By id, rows 3 and 4 would go; the payments row takes the turn after row 3's.
  CHECK(f.take() == Ids{3, 11});
  f.accept(3);
  f.accept(11);
  CHECK(f.take() == Ids{4, 5});
}

TEST_CASE("Two backlogs held share the window row for row", "[dispatch][planner][fair]") {
  auto policy = test_policy();
  policy.window = 4;
  PlannerFixture f(policy);
  for (core::RowId id = 1; id <= 6; ++id) f.add({to("a", id)});
  for (core::RowId id = 7; id <= 12; ++id) f.add({to("b", id)});
  CHECK(f.take() == Ids{1, 7, 2, 8});
}

TEST_CASE("Fair share reorders sessions, never the rows of one session", "[dispatch][planner][fair]") {
  auto policy = test_policy();
  policy.window = 10;
  PlannerFixture f(policy);
  // Session s writes to bulk, then to payments: its payments row waits for its bulk rows.
  f.add({to("bulk", 1, "s"), to("bulk", 2, "s"), to("bulk", 3, "t"), to("bulk", 4, "t"), to("payments", 5, "s")});
  CHECK(f.take() == Ids{1, 3});
  f.accept(1);
  CHECK(f.take() == Ids{2});
  f.accept(2);
  CHECK(f.take() == Ids{5});
  f.accept(3);
  CHECK(f.take() == Ids{4});
}

TEST_CASE("Destinations whose turns have passed are forgotten without upsetting the order",
          "[dispatch][planner][fair]") {
  auto policy = test_policy();
  policy.window = 1;
  policy.max_buffered = 5000;
  PlannerFixture f(policy);
  core::RowId id = 0;
  for (int i = 0; i < 1500; ++i) {
    f.add({to(numbered("d", i).c_str(), ++id)});
    CHECK(f.take() == Ids{id});
    f.accept(id);
  }
  for (int i = 0; i < 3; ++i) f.add({to("bulk", ++id)});
  f.add({to("d7", ++id)});
  CHECK(f.take() == Ids{id - 3});
  f.accept(id - 3);
  CHECK(f.take() == Ids{id});  // d7's turn comes right after bulk's first
}

}  // namespace outboxd::dispatch::test
