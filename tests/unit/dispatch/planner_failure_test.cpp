// Planner retry rules: rejections with backoff, parking, releases, wake-up times, lost partitions.
#include <catch2/catch.hpp>

#include "dispatch/planner.hpp"
#include "planner_fixture.hpp"

using namespace outboxd::dispatch::test;
using outboxd::dispatch::FailureWrite;

namespace {

void check_failure(const FailureWrite& write, outboxd::core::RowId id, int attempts,
                   outboxd::core::Duration retry_in, const std::string& error, bool park) {
  CHECK(write.id == id);
  CHECK(write.attempts == attempts);
  CHECK(write.retry_in == retry_in);
  CHECK(write.error == error);
  CHECK(write.park == park);
}

}  // namespace

TEST_CASE("A rejection backs off with jitter and the row is retried before later rows", "[dispatch][planner][retry]") {
  PlannerFixture f;
  f.random.set(0.75);  // jitter factor 1 + 0.2 * (2 * 0.75 - 1) = 1.1
  const auto t0 = f.clock.now();
  f.add({row(1, "A"), row(2, "A"), row(3, "B")});
  CHECK(f.take() == Ids{1, 3});
  f.reject(1, "broker said no");
  REQUIRE(f.failures().size() == 1);
  check_failure(f.failures()[0], 1, 1, 110ms, "broker said no", false);
  CHECK(f.planner.counters().rejected == 1);
  CHECK(f.planner.next_retry() == t0 + 110ms);

  CHECK(f.take().empty());  // 2 waits behind 1
  f.accept(3);
  f.add({row(4, "B")});
  CHECK(f.take() == Ids{4});  // other sessions keep flowing
  f.planner.on_persisted();

  f.clock.advance(109ms);
  CHECK(f.take().empty());
  f.clock.advance(1ms);
  CHECK(f.take() == Ids{1});
  CHECK(f.planner.next_retry() == std::nullopt);

  f.reject(1, "still no");
  REQUIRE(f.failures().size() == 1);
  check_failure(f.failures()[0], 1, 2, 220ms, "still no", false);
  CHECK(f.planner.next_retry() == t0 + 110ms + 220ms);
  f.clock.advance(220ms);
  CHECK(f.take() == Ids{1});
  f.accept(1);
  CHECK(f.take() == Ids{2});
}

TEST_CASE("Attempts continue from the persisted count", "[dispatch][planner][retry]") {
  PlannerFixture f;
  f.random.set(0.0);  // factor 0.8
  f.add({row(7, "A", 2)});
  f.take();
  f.reject(7, "");
  REQUIRE(f.failures().size() == 1);
  check_failure(f.failures()[0], 7, 3, 320ms, "rejected", false);  // 400ms * 0.8; empty reason gets a default
}

TEST_CASE("A row has at most one pending write: the newest decision replaces older ones", "[dispatch][planner][retry]") {
  PlannerFixture f;
  f.add({row(1, "A"), row(2, "B"), row(3, "C")});
  CHECK(f.take() == Ids{1, 2, 3});
  f.reject(1, "one");
  f.reject(2, "first");
  f.reject(3, "third");
  f.clock.advance(100ms);
  CHECK(f.take() == Ids{1, 2, 3});
  f.reject(1, "two");
  REQUIRE(f.failures().size() == 3);
  check_failure(f.failures()[0], 1, 2, 200ms, "two", false);  // replaced in place

  f.accept(3);  // the row is done: its failure need not be written
  f.clock.advance(200ms);
  CHECK(f.take() == Ids{1});
  f.accept(1);
  CHECK(f.dispatched() == Ids{3, 1});
  REQUIRE(f.failures().size() == 1);
  check_failure(f.failures()[0], 2, 1, 100ms, "first", false);
  f.planner.on_persisted();
  CHECK(f.planner.pending_writes().empty());
}

TEST_CASE("A row that cannot be made into a message is parked at its first attempt", "[dispatch][planner][park]") {
  PlannerFixture f;  // max_attempts 5
  f.add({row(1, "A"), row(2, "A"), row(3, "B")});
  CHECK(f.take() == Ids{1, 3});
  f.planner.on_outcome(1, outboxd::core::DeliveryOutcome::unsendable, R"(headers: key "a": arrays and objects are not supported)");
  REQUIRE(f.failures().size() == 1);
  check_failure(f.failures()[0], 1, 1, 0ms, R"(headers: key "a": arrays and objects are not supported)", true);
  CHECK(f.planner.counters().parked == 1);
  CHECK(f.planner.counters().unsendable == 1);
  CHECK(f.planner.counters().rejected == 0);
  CHECK(f.planner.next_retry() == std::nullopt);  // no retry timer
  CHECK(f.take().empty());                          // 2 stays behind its parked session
}

TEST_CASE("Reaching max_attempts parks the row and drops its session's buffered rows", "[dispatch][planner][park]") {
  PlannerFixture f;  // max_attempts 5
  f.add({row(1, "A", 4), row(2, "A"), row(3, "A"), row(4, "B"), row(5, "B")});
  CHECK(f.take() == Ids{1, 4});
  f.reject(1, "cannot encode headers");
  REQUIRE(f.failures().size() == 1);
  check_failure(f.failures()[0], 1, 5, 0ms, "cannot encode headers", true);
  CHECK(f.planner.counters().parked == 1);
  CHECK(f.planner.counters().rejected == 1);
  CHECK(f.planner.buffered() == 1);  // only B's row 5 is left
  CHECK(f.planner.in_flight() == 1);
  CHECK(f.planner.next_retry() == std::nullopt);
  CHECK(f.planner.claim_room() == 1000 - 2);

  // Until the park is persisted, the claim may still return the session's rows.
  CHECK(f.add({row(1, "A", 4), row(2, "A"), row(3, "A"), row(6, "A")}) == 0);
  CHECK(f.add({row(7, "C")}) == 1);
  CHECK(f.take() == Ids{7});
  f.accept(4);
  CHECK(f.take() == Ids{5});

  f.planner.on_persisted();
  CHECK(f.failures().empty());
  // Once persisted, the database holds the park; whatever it returns is new work
  // (an operator requeued or skipped the parked row).
  CHECK(f.add({row(2, "A"), row(3, "A")}) == 2);
  CHECK(f.take() == Ids{2});
}

TEST_CASE("A parked row drops and refuses only its own writer's rows of the session id",
          "[dispatch][planner][park]") {
  PlannerFixture f;  // max_attempts 5
  f.add({written_by("a", row(1, "order-42", 4)), written_by("a", row(2, "order-42")),
         written_by("b", row(3, "order-42")), written_by("b", row(4, "order-42"))});
  CHECK(f.take() == Ids{1, 3});
  f.reject(1);  // the fifth attempt: parked
  REQUIRE(f.failures().size() == 1);
  CHECK(f.failures()[0].park);
  CHECK(f.planner.buffered() == 1);  // a's 2 dropped with the park; b's 4 kept
  // Until the park is persisted the claim may return a's rows again: refused; b's are its own session.
  CHECK(f.add({written_by("a", row(5, "order-42")), written_by("b", row(6, "order-42"))}) == 1);
  f.accept(3);
  CHECK(f.take() == Ids{4});
  f.accept(4);
  CHECK(f.take() == Ids{6});
}

TEST_CASE("A row without session parks alone", "[dispatch][planner][park]") {
  auto policy = test_policy();
  policy.max_attempts = 1;
  PlannerFixture f(policy);
  f.add({row(1), row(2)});
  CHECK(f.take() == Ids{1, 2});
  f.reject(1, "bad");
  REQUIRE(f.failures().size() == 1);
  check_failure(f.failures()[0], 1, 1, 0ms, "bad", true);
  CHECK(f.add({row(1)}) == 0);
  CHECK(f.add({row(3)}) == 1);
  f.planner.on_persisted();
  CHECK(f.add({row(1)}) == 1);
}

TEST_CASE("Parking with several rows of the session in flight orphans the others", "[dispatch][planner][park]") {
  auto policy = test_policy();
  policy.per_session_in_flight = 3;
  PlannerFixture f(policy);
  f.add({row(1, "A"), row(2, "A", 4), row(3, "A"), row(4, "A"), row(5, "A")});
  CHECK(f.take() == Ids{1, 2, 3});
  f.reject(2, "bad");
  CHECK(f.planner.buffered() == 0);  // 4 and 5 dropped

  SECTION("an orphan that is accepted is still marked dispatched") {
    f.accept(1);
    CHECK(f.dispatched() == Ids{1});
  }
  SECTION("an orphan that is released is forgotten: no write, no retry") {
    f.release(3);
    CHECK(f.failures().size() == 1);
    f.clock.advance(1s);
    CHECK(f.take().empty());
    CHECK(f.planner.in_flight() == 1);
  }
  SECTION("an orphan that is rejected records its attempt and is forgotten") {
    f.reject(3, "also bad");
    REQUIRE(f.failures().size() == 2);
    check_failure(f.failures()[1], 3, 1, 100ms, "also bad", false);
    f.clock.advance(1s);
    CHECK(f.take().empty());
  }
  SECTION("after the park is persisted the session takes new rows, behind its orphans") {
    f.planner.on_persisted();
    CHECK(f.add({row(4, "A"), row(5, "A")}) == 2);
    CHECK(f.take() == Ids{4});  // two orphans still count against the limit of 3
    f.release(1);
    f.release(3);
    CHECK(f.take() == Ids{5});
    CHECK(f.planner.in_flight_ids() == Ids{4, 5});
  }
}

TEST_CASE("released and unknown outcomes retry without counting an attempt", "[dispatch][planner][release]") {
  PlannerFixture f;
  const auto t0 = f.clock.now();
  f.add({row(1, "A"), row(2, "A"), row(3, "B")});
  CHECK(f.take() == Ids{1, 3});
  f.release(1);
  f.lose(3);
  CHECK(f.failures().empty());
  CHECK(f.planner.counters().released == 1);
  CHECK(f.planner.counters().unknown == 1);
  CHECK(f.planner.next_retry() == t0 + 50ms);
  CHECK(f.take().empty());
  f.clock.advance(50ms);
  CHECK(f.take() == Ids{1, 3});  // 1 is the head of A again, before 2
  f.accept(1);
  CHECK(f.take() == Ids{2});
  CHECK(f.failures().empty());
}

TEST_CASE("Every releases_per_attempt-th consecutive release counts as an attempt", "[dispatch][planner][release]") {
  PlannerFixture f;  // releases_per_attempt 3
  f.add({row(1, "A")});
  auto cycle = [&f](bool lost, std::string_view reason) {
    REQUIRE(f.take() == Ids{1});
    if (lost) {
      f.lose(1, reason);
    } else {
      f.release(1, reason);
    }
  };
  cycle(false, "");
  f.clock.advance(50ms);
  cycle(true, "connection lost");
  f.clock.advance(50ms);
  CHECK(f.failures().empty());
  cycle(false, "queue full");
  REQUIRE(f.failures().size() == 1);
  check_failure(f.failures()[0], 1, 1, 100ms, "released 3 times in a row: queue full", false);

  // Counted as an attempt, so the backoff applies, not release_retry.
  f.clock.advance(50ms);
  CHECK(f.take().empty());
  f.clock.advance(50ms);
  f.planner.on_persisted();

  cycle(true, "");
  f.clock.advance(50ms);
  cycle(true, "");
  f.clock.advance(50ms);
  cycle(true, "");
  REQUIRE(f.failures().size() == 1);
  check_failure(f.failures()[0], 1, 2, 200ms, "outcome unknown 6 times in a row", false);
}

TEST_CASE("Rows the fence stopped never count as attempts and wait for their lease", "[dispatch][planner][fence]") {
  PlannerFixture f;  // releases_per_attempt 3
  const auto t0 = f.clock.now();
  f.add({row(1, "A", 0, 1), row(2, "A", 0, 1), row(3, "B", 0, 2)});
  for (int round = 0; round < 5; ++round) {
    REQUIRE(f.take() == Ids{1, 3});
    f.planner.on_outcome(1, outboxd::core::DeliveryOutcome::not_sent, "fence");
    f.planner.on_outcome(3, outboxd::core::DeliveryOutcome::not_sent, "fence");
    CHECK(f.planner.next_retry() == f.clock.now() + 50ms);
    f.clock.advance(50ms);
  }
  CHECK(f.failures().empty());  // five in a row: never an attempt
  CHECK(f.planner.counters().not_sent == 10);
  CHECK(f.clock.now() == t0 + 250ms);

  // Partition 2 was lost meanwhile: its row in flight is forgotten on the outcome, not retried.
  REQUIRE(f.take() == Ids{1, 3});
  f.planner.drop_partition(2);
  f.planner.on_outcome(3, outboxd::core::DeliveryOutcome::not_sent, "fence");
  CHECK_FALSE(f.planner.knows(3));
  CHECK(f.planner.find(3) == nullptr);
  f.accept(1);
  CHECK(f.take() == Ids{2});
}

TEST_CASE("A rejection ends a streak of releases", "[dispatch][planner][release]") {
  PlannerFixture f;
  f.add({row(1, "A")});
  f.take();
  f.release(1);
  f.clock.advance(50ms);
  f.take();
  f.release(1);
  f.clock.advance(50ms);
  f.take();
  f.reject(1, "no");  // attempt 1; streak back to 0
  f.clock.advance(100ms);
  for (int i = 0; i < 2; ++i) {
    REQUIRE(f.take() == Ids{1});
    f.release(1);
    f.clock.advance(50ms);
  }
  REQUIRE(f.failures().size() == 1);
  REQUIRE(f.take() == Ids{1});
  f.release(1);
  REQUIRE(f.failures().size() == 1);  // the newer failure replaces the unpersisted one
  check_failure(f.failures()[0], 1, 2, 200ms, "released 3 times in a row", false);
}

TEST_CASE("Counted releases can park a row", "[dispatch][planner][release][park]") {
  PlannerFixture f;
  f.add({row(1, "A", 4), row(2, "A")});
  for (int i = 0; i < 3; ++i) {
    REQUIRE(f.take() == Ids{1});
    f.release(1);
    f.clock.advance(50ms);
  }
  REQUIRE(f.failures().size() == 1);
  check_failure(f.failures()[0], 1, 5, 0ms, "released 3 times in a row", true);
  CHECK(f.planner.counters().parked == 1);
  CHECK(f.planner.counters().released == 3);
  CHECK(f.take().empty());
  CHECK(f.planner.buffered() == 0);
}

TEST_CASE("releases_per_attempt <= 0 never counts releases", "[dispatch][planner][release]") {
  auto policy = test_policy();
  policy.releases_per_attempt = 0;
  PlannerFixture f(policy);
  f.add({row(1, "A")});
  for (int i = 0; i < 20; ++i) {
    REQUIRE(f.take() == Ids{1});
    f.release(1);
    f.clock.advance(50ms);
  }
  CHECK(f.failures().empty());
}

TEST_CASE("next_retry is the earliest retry time of a row that could go out", "[dispatch][planner][wakeup]") {
  const auto t0 = PlannerFixture().clock.now();

  SECTION("nothing waiting: no wake-up") {
    PlannerFixture f;
    CHECK(f.planner.next_retry() == std::nullopt);
    f.add({row(1, "A")});
    CHECK(f.planner.next_retry() == std::nullopt);
    f.take();
    CHECK(f.planner.next_retry() == std::nullopt);
  }
  SECTION("several sessions: the earliest first, then the next") {
    PlannerFixture f;
    f.add({row(1, "A"), row(2, "B"), row(3)});
    f.take();
    f.reject(1);  // t0 + 100ms
    f.clock.advance(10ms);
    f.release(2);  // t0 + 60ms
    f.clock.advance(10ms);
    f.reject(3);  // t0 + 120ms
    CHECK(f.planner.next_retry() == t0 + 60ms);
    f.clock.advance(40ms);
    CHECK(f.take() == Ids{2});
    CHECK(f.planner.next_retry() == t0 + 100ms);
    f.clock.advance(40ms);
    CHECK(f.take() == Ids{1});
    CHECK(f.planner.next_retry() == t0 + 120ms);
    f.clock.advance(20ms);
    CHECK(f.take() == Ids{3});
    CHECK(f.planner.next_retry() == std::nullopt);
  }
  SECTION("a due time that was not acted on is reported in the past") {
    PlannerFixture f;
    f.add({row(1, "A")});
    f.take();
    f.release(1);
    f.clock.advance(1s);
    CHECK(f.planner.next_retry() == t0 + 50ms);
  }
  SECTION("a row stuck behind another row of its session is left out") {
    auto policy = test_policy();
    policy.per_session_in_flight = 2;
    PlannerFixture f(policy);
    f.add({row(1, "A"), row(2, "A"), row(3, "A")});
    CHECK(f.take() == Ids{1, 2});
    f.release(2);  // t0 + 50ms, head of A for now
    CHECK(f.planner.next_retry() == t0 + 50ms);
    f.reject(1);   // t0 + 100ms, head of A: 2 is now stuck behind it
    CHECK(f.planner.next_retry() == t0 + 100ms);
    f.clock.advance(100ms);
    CHECK(f.take() == Ids{1, 2});
    CHECK(f.planner.next_retry() == std::nullopt);
  }
  SECTION("a waiting head with a free slot in its session is reported") {
    auto policy = test_policy();
    policy.per_session_in_flight = 2;
    PlannerFixture f(policy);
    f.add({row(1, "A"), row(2, "A"), row(3, "A"), row(4, "A")});
    CHECK(f.take() == Ids{1, 2});
    f.release(1);  // t0 + 50ms
    f.clock.advance(50ms);
    CHECK(f.take() == Ids{1});
    f.reject(2);   // t0 + 150ms: head of A, one slot free
    CHECK(f.planner.next_retry() == t0 + 150ms);
  }
  SECTION("a parked or dropped waiting row no longer wakes anyone") {
    PlannerFixture f;
    f.add({row(1, "A", 0, 1), row(2, "B", 4, 2)});
    f.take();
    f.reject(1);
    CHECK(f.planner.next_retry() == t0 + 100ms);
    f.planner.drop_partition(1);
    CHECK(f.planner.next_retry() == std::nullopt);
    f.reject(2);  // parked
    CHECK(f.planner.next_retry() == std::nullopt);
  }
}

TEST_CASE("drop_partition forgets buffered rows of the partition, not rows in flight", "[dispatch][planner][partition]") {
  PlannerFixture f;
  f.add({row(1, "A", 0, 1), row(2, "A", 0, 1), row(3, "B", 0, 2), row(4, "B", 0, 2), row(5, "", 0, 1),
         row(6, "", 0, 2), row(7, "", 0, 1)});
  CHECK(f.take() == Ids{1, 3, 5, 6, 7});
  f.release(7);  // waiting for a retry in partition 1
  CHECK(f.planner.buffered() == 3);
  CHECK(f.planner.claim_room() == 1000 - 7);

  f.planner.drop_partition(1);
  CHECK(f.planner.buffered() == 1);  // only 4 (partition 2)
  CHECK(f.planner.in_flight_ids() == Ids{1, 3, 5, 6});
  CHECK(f.planner.claim_room() == 1000 - 5);
  f.clock.advance(1s);
  CHECK(f.take().empty());

  SECTION("in-flight rows of the dropped partition: accepted ones are marked dispatched") {
    f.accept(1);
    f.accept(3);
    CHECK(f.dispatched() == Ids{1, 3});
    CHECK(f.take() == Ids{4});
  }
  SECTION("in-flight rows of the dropped partition: others are forgotten") {
    f.release(1);
    f.lose(5);
    f.clock.advance(1s);
    CHECK(f.take().empty());
    CHECK(f.planner.in_flight_ids() == Ids{3, 6});
    f.reject(6, "still ours");  // partition 2: retried as usual
    f.clock.advance(100ms);
    CHECK(f.take() == Ids{6});
  }
  SECTION("an orphan that is rejected records its attempt; it is refused until that is persisted") {
    f.reject(5, "no");
    REQUIRE(f.failures().size() == 1);
    check_failure(f.failures()[0], 5, 1, 100ms, "no", false);
    CHECK(f.add({row(5, "", 0, 1)}) == 0);
    f.planner.on_persisted();
    CHECK(f.add({row(5, "", 1, 1)}) == 1);
  }
  SECTION("a regained partition's rows queue behind an orphan still in flight") {
    CHECK(f.add({row(2, "A", 0, 1), row(7, "", 0, 1)}) == 2);
    CHECK(f.take() == Ids{7});
    f.accept(1);
    CHECK(f.take() == Ids{2});
  }
}

TEST_CASE("a lost connection is an attempt for no row, and its rows are read again from the database",
          "[dispatch][planner][connection_lost]") {
  PlannerFixture f;
  f.add({row(1, "A"), row(2, "A"), row(3, "B"), row(4)});
  CHECK(f.take() == Ids{1, 3, 4});
  for (const outboxd::core::RowId id : {1, 3, 4}) f.planner.on_outcome(id, outboxd::core::DeliveryOutcome::connection_lost, "gone");
  CHECK(f.failures().empty());
  CHECK(f.planner.counters().connection_lost == 3);
  // Nothing is sent again from memory: SQL may have cancelled or skipped a row meanwhile.
  // Row 2 goes too, as it may not overtake row 1.
  for (const outboxd::core::RowId id : {1, 2, 3, 4}) CHECK_FALSE(f.planner.knows(id));
  CHECK_FALSE(f.planner.next_retry());
  CHECK(f.take().empty());
  CHECK(f.planner.in_flight() == 0);
  CHECK(f.planner.held_bytes() == 0);

  SECTION("as the claim returns them, they go out in order, with the attempts the database holds") {
    CHECK(f.add({row(1, "A"), row(2, "A"), row(3, "B")}) == 3);
    CHECK(f.take() == Ids{1, 3});
    f.accept(1);
    CHECK(f.take() == Ids{2});
  }
  SECTION("however often it happens") {
    for (int i = 0; i < 20; ++i) {
      f.add({row(3, "B")});
      CHECK(f.take() == Ids{3});
      f.planner.on_outcome(3, outboxd::core::DeliveryOutcome::connection_lost, "gone");
    }
    CHECK(f.failures().empty());
  }
}
