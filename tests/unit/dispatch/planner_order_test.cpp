// Planner order rules: per-session id order, late commits, window, fairness, rows without session.
#include <catch2/catch.hpp>

#include "dispatch/planner.hpp"
#include "planner_fixture.hpp"

using namespace outboxd::dispatch::test;

TEST_CASE("Strict mode hands out a session's rows one at a time, in id order, across adds", "[dispatch][planner]") {
  PlannerFixture f;
  REQUIRE(f.add({row(1, "A"), row(2, "A")}) == 2);
  CHECK(f.take() == Ids{1});
  CHECK(f.take().empty());
  REQUIRE(f.add({row(3, "A")}) == 1);
  CHECK(f.take().empty());  // 1 is still in flight
  f.accept(1);
  CHECK(f.take() == Ids{2});  // ready immediately after the acceptance
  f.accept(2);
  CHECK(f.take() == Ids{3});
  f.accept(3);
  CHECK(f.take().empty());
  CHECK(f.dispatched() == Ids{1, 2, 3});
  CHECK(f.planner.counters().published == 3);
  CHECK(f.planner.counters().accepted == 3);
}

TEST_CASE("Sessions flow independently of each other", "[dispatch][planner]") {
  PlannerFixture f;
  f.add({row(1, "A"), row(2, "B"), row(3, "A"), row(4, "B"), row(5, "C")});
  CHECK(f.take() == Ids{1, 2, 5});
  f.accept(2);
  CHECK(f.take() == Ids{4});
  f.accept(1);
  CHECK(f.take() == Ids{3});
  CHECK(f.planner.in_flight() == 3);
  CHECK(f.planner.in_flight_ids() == Ids{3, 4, 5});
  CHECK(f.planner.buffered() == 0);
}

TEST_CASE("One session id from two writers is two sessions, and rows without writer a third", "[dispatch][planner]") {
  PlannerFixture f;
  f.add({written_by("a", row(1, "order-42")), written_by("a", row(2, "order-42")),
         written_by("b", row(3, "order-42")), written_by("b", row(4, "order-42")), row(5, "order-42"),
         row(6, "order-42")});
  CHECK(f.take() == Ids{1, 3, 5});  // one head per writer, not one for the session id
  f.reject(1);                        // a's session backs off: b's and the writerless one do not wait
  f.accept(3);
  f.accept(5);
  CHECK(f.take() == Ids{4, 6});
  CHECK(f.planner.buffered() == 2);  // a's 1 (retrying) and 2 behind it
  f.clock.advance(100ms);
  CHECK(f.take() == Ids{1});
  f.accept(1);
  CHECK(f.take() == Ids{2});
}

TEST_CASE("take_ready serves the oldest session head first", "[dispatch][planner]") {
  auto policy = test_policy();
  policy.window = 1;
  PlannerFixture f(policy);
  f.add({row(1, "A"), row(2, "B"), row(3, "A"), row(4, "B")});
  CHECK(f.take() == Ids{1});
  f.accept(1);
  CHECK(f.take() == Ids{2});  // B's head (2) is older than A's (3)
  f.accept(2);
  CHECK(f.take() == Ids{3});
  f.accept(3);
  CHECK(f.take() == Ids{4});
}

TEST_CASE("A busy session cannot starve the others", "[dispatch][planner]") {
  auto policy = test_policy();
  policy.window = 4;
  policy.per_session_in_flight = 3;
  PlannerFixture f(policy);
  std::vector<outboxd::dispatch::test::RowRef> rows;
  for (int id = 1; id <= 100; ++id) rows.push_back(row(id, "busy"));
  rows.push_back(row(200, "quiet"));
  REQUIRE(f.planner.add(held(rows)) == 101);
  CHECK(f.take() == Ids{1, 2, 3, 200});
  f.accept(200);
  CHECK(f.take().empty());  // busy is at its limit of 3
  f.accept(1);
  CHECK(f.take() == Ids{4});
}

TEST_CASE("The window bounds the rows in flight across all sessions", "[dispatch][planner]") {
  auto policy = test_policy();
  policy.window = 5;
  PlannerFixture f(policy);
  std::vector<outboxd::dispatch::test::RowRef> rows;
  for (int id = 1; id <= 20; ++id) rows.push_back(row(id, numbered("s", id)));
  f.planner.add(held(rows));
  CHECK(f.take() == Ids{1, 2, 3, 4, 5});
  CHECK(f.take().empty());
  CHECK(f.planner.in_flight() == 5);
  f.accept(2);
  f.accept(4);
  f.reject(5);
  CHECK(f.take() == Ids{6, 7, 8});
  CHECK(f.planner.in_flight() == 5);
  CHECK(f.planner.buffered() == 13);  // 9..20 and 5, waiting for its retry
}

TEST_CASE("per_session_in_flight = 3 keeps up to three rows of a session out, in id order", "[dispatch][planner]") {
  auto policy = test_policy();
  policy.per_session_in_flight = 3;
  PlannerFixture f(policy);
  f.add({row(1, "A"), row(2, "A"), row(3, "A"), row(4, "A"), row(5, "A"), row(6, "B")});
  CHECK(f.take() == Ids{1, 2, 3, 6});
  CHECK(f.take().empty());
  f.accept(2);  // out of order acceptance frees one slot
  CHECK(f.take() == Ids{4});
  f.accept(1);
  f.accept(3);
  CHECK(f.take() == Ids{5});

  SECTION("a rejected row blocks its session even with free slots, and goes out first") {
    f.reject(4);  // waits 100ms
    f.add({row(7, "A")});
    CHECK(f.take().empty());
    f.clock.advance(100ms);
    CHECK(f.take() == Ids{4, 7});
  }
}

TEST_CASE("Rows without a session are bounded by the window only", "[dispatch][planner]") {
  auto policy = test_policy();
  policy.window = 3;
  PlannerFixture f(policy);
  f.add({row(1), row(2), row(3), row(4), row(5)});
  CHECK(f.take() == Ids{1, 2, 3});
  f.accept(2);
  CHECK(f.take() == Ids{4});
  f.reject(1);  // only row 1 waits; row 5 is not behind it
  CHECK(f.take() == Ids{5});
  f.accept(3);
  f.accept(4);
  f.accept(5);
  CHECK(f.take().empty());
  f.clock.advance(100ms);
  CHECK(f.take() == Ids{1});
}

TEST_CASE("Late commits: a lower id arriving after a higher one of its session", "[dispatch][planner][late]") {
  PlannerFixture f;

  SECTION("while the higher one is buffered: the lower one goes first") {
    f.add({row(5, "A")});
    f.add({row(3, "A")});
    CHECK(f.take() == Ids{3});
    f.accept(3);
    CHECK(f.take() == Ids{5});
  }
  SECTION("while both wait behind an in-flight row: still id order") {
    f.add({row(1, "A")});
    CHECK(f.take() == Ids{1});
    f.add({row(5, "A")});
    f.add({row(3, "A")});
    f.accept(1);
    CHECK(f.take() == Ids{3});
    f.accept(3);
    CHECK(f.take() == Ids{5});
  }
  SECTION("while the higher one is in flight: the lower one is queued behind it") {
    f.add({row(5, "A")});
    CHECK(f.take() == Ids{5});
    f.add({row(3, "A")});
    CHECK(f.take().empty());
    f.accept(5);
    CHECK(f.take() == Ids{3});
  }
  SECTION("after the higher one was accepted: the lower one is simply next") {
    f.add({row(5, "A")});
    CHECK(f.take() == Ids{5});
    f.accept(5);
    REQUIRE(f.add({row(3, "A")}) == 1);
    CHECK(f.take() == Ids{3});
    CHECK(f.dispatched() == Ids{5});
  }
  SECTION("while the higher one waits for a retry: the session stays blocked behind it") {
    f.add({row(5, "A")});
    CHECK(f.take() == Ids{5});
    f.reject(5);  // retry in 100ms
    f.add({row(3, "A")});
    CHECK(f.take().empty());
    f.clock.advance(100ms);
    CHECK(f.take() == Ids{5});
    f.accept(5);
    CHECK(f.take() == Ids{3});
  }
}

TEST_CASE("add ignores ids it already knows", "[dispatch][planner]") {
  PlannerFixture f;
  CHECK(f.add({row(1, "A"), row(2, "B")}) == 2);
  CHECK(f.add({row(1, "A"), row(2, "B"), row(3, "C")}) == 1);  // buffered
  CHECK(f.add({row(4), row(4)}) == 1);                         // twice in one batch
  CHECK(f.take() == Ids{1, 2, 3, 4});
  CHECK(f.add({row(1, "A")}) == 0);  // in flight
  f.accept(1);
  CHECK(f.add({row(1, "A")}) == 0);  // accepted, not yet persisted
  CHECK(f.take().empty());
  f.planner.on_persisted();
  CHECK(f.add({row(1, "A")}) == 1);  // forgotten: it would only come back if the database returned it
  CHECK(f.take() == Ids{1});
}

TEST_CASE("claim_room counts buffered, in-flight and accepted-not-persisted rows", "[dispatch][planner]") {
  auto policy = test_policy();
  policy.max_buffered = 10;
  PlannerFixture f(policy);
  CHECK(f.planner.claim_room() == 10);
  f.add({row(1, "A"), row(2, "B"), row(3, "C"), row(4, "A")});
  CHECK(f.planner.claim_room() == 6);
  CHECK(f.take() == Ids{1, 2, 3});
  CHECK(f.planner.claim_room() == 6);
  f.accept(1);
  f.accept(2);
  CHECK(f.planner.claim_room() == 6);
  f.planner.on_persisted();
  CHECK(f.planner.claim_room() == 8);
  f.reject(3);  // waiting rows still count
  CHECK(f.planner.claim_room() == 8);

  SECTION("never negative, and add takes what it is given") {
    std::vector<outboxd::dispatch::test::RowRef> rows;
    for (int id = 100; id < 120; ++id) rows.push_back(row(id));
    CHECK(f.planner.add(held(rows)) == 20);
    CHECK(f.planner.claim_room() == 0);
  }
}

TEST_CASE("pending_writes collect acceptances until on_persisted", "[dispatch][planner]") {
  PlannerFixture f;
  CHECK(f.planner.pending_writes().empty());
  f.add({row(1, "A"), row(2, "B"), row(3, "C")});
  f.take();
  f.accept(3);
  f.accept(1);
  CHECK_FALSE(f.planner.pending_writes().empty());
  CHECK(f.dispatched() == Ids{3, 1});  // in outcome order
  CHECK(f.failures().empty());
  f.planner.on_persisted();
  CHECK(f.planner.pending_writes().empty());
  f.accept(2);
  CHECK(f.dispatched() == Ids{2});
}

TEST_CASE("Outcomes for ids not in flight are ignored and counted as stale", "[dispatch][planner]") {
  PlannerFixture f;
  f.add({row(1, "A"), row(2, "A")});
  CHECK(f.take() == Ids{1});
  f.accept(99);   // never known
  f.reject(2);    // buffered, not in flight
  f.release(2);
  f.accept(1);
  f.accept(1);    // a second outcome for the same delivery
  f.reject(1);
  CHECK(f.planner.counters().stale == 5);
  CHECK(f.planner.counters().accepted == 1);
  CHECK(f.planner.counters().rejected == 0);
  CHECK(f.planner.counters().released == 0);
  CHECK(f.dispatched() == Ids{1});
  CHECK(f.failures().empty());
  CHECK(f.take() == Ids{2});
}
