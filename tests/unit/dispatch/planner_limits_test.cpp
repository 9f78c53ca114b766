// Destination policy: priority classes, rate limits and rows in flight per destination.
#include <catch2/catch.hpp>

#include "planner_fixture.hpp"

namespace outboxd::dispatch::test {
namespace {

PlannerPolicy with_destination(PlannerPolicy policy, const char* name, DestinationPolicy destination) {
  policy.destinations[name] = destination;
  return policy;
}

DestinationPolicy priority(int value) {
  DestinationPolicy policy;
  policy.priority = value;
  return policy;
}

DestinationPolicy in_flight_limit(std::size_t limit) {
  DestinationPolicy policy;
  policy.max_in_flight = limit;
  return policy;
}

DestinationPolicy rate(double rows_per_second, double burst) {
  DestinationPolicy policy;
  policy.max_rate = rows_per_second;
  policy.burst = burst;
  return policy;
}

const DestinationState* state_of(const std::vector<DestinationState>& states, const std::string& name) {
  for (const auto& state : states) {
    if (state.name == name) return &state;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("A higher priority class goes out before a lower class's backlog", "[dispatch][planner][limits]") {
  auto policy = with_destination(test_policy(), "payments", priority(10));
  policy.window = 2;
  PlannerFixture f(policy);
  for (core::RowId id = 1; id <= 10; ++id) f.add({to("bulk", id)});
  f.add({to("payments", 11), to("payments", 12), to("payments", 13)});
  // Fair share alone would give 1, 11; the class puts every payments row first.
  CHECK(f.take() == Ids{11, 12});
  f.accept(11);
  f.accept(12);
  CHECK(f.take() == Ids{13, 1});
}

TEST_CASE("Destinations of one class still share the window fairly", "[dispatch][planner][limits]") {
  auto policy = with_destination(with_destination(test_policy(), "a", priority(5)), "b", priority(5));
  policy.window = 4;
  PlannerFixture f(policy);
  for (core::RowId id = 1; id <= 6; ++id) f.add({to("a", id)});
  for (core::RowId id = 7; id <= 12; ++id) f.add({to("b", id)});
  f.add({to("c", 13)});
  CHECK(f.take() == Ids{1, 7, 2, 8});
}

TEST_CASE("A priority class never reorders the rows of one session", "[dispatch][planner][limits]") {
  PlannerFixture f(with_destination(test_policy(), "payments", priority(10)));
  f.add({to("bulk", 1, "s"), to("payments", 2, "s"), to("bulk", 3, "t")});
  CHECK(f.take() == Ids{1, 3});
  f.accept(1);
  CHECK(f.take() == Ids{2});
}

TEST_CASE("A destination at its in-flight limit waits, and the others take the rest of the window",
          "[dispatch][planner][limits]") {
  auto policy = with_destination(test_policy(), "slow", in_flight_limit(2));
  policy.window = 5;
  PlannerFixture f(policy);
  for (core::RowId id = 1; id <= 6; ++id) f.add({to("slow", id)});
  for (core::RowId id = 7; id <= 12; ++id) f.add({to("fast", id)});
  CHECK(f.take() == Ids{1, 7, 2, 8, 9});
  const auto states = f.planner.configured_destinations();
  REQUIRE(state_of(states, "slow") != nullptr);
  CHECK(state_of(states, "slow")->in_flight == 2);
  CHECK(state_of(states, "slow")->held_by == Limit::in_flight);
  f.accept(7);
  f.accept(8);
  CHECK(f.take() == Ids{10, 11});
  f.accept(1);
  // The slow row held back keeps its place: it goes out the moment a slot frees.
  CHECK(f.take() == Ids{3});
  CHECK(f.planner.in_flight() == 5);
}

TEST_CASE("A limited destination's held row keeps its session's order", "[dispatch][planner][limits]") {
  PlannerFixture f(with_destination(test_policy(), "slow", in_flight_limit(1)));
  f.add({to("slow", 1, "a"), to("slow", 2, "b"), to("fast", 3, "b"), to("fast", 4, "c")});
  CHECK(f.take() == Ids{1, 4});
  f.accept(1);
  CHECK(f.take() == Ids{2});
  f.accept(2);
  CHECK(f.take() == Ids{3});
}

TEST_CASE("A rate limit lets its burst out, then one row per token", "[dispatch][planner][limits]") {
  PlannerFixture f(with_destination(test_policy(), "metered", rate(10, 2)));
  for (core::RowId id = 1; id <= 20; ++id) f.add({to("metered", id)});
  f.add({to("free", 21)});
  CHECK(f.take() == Ids{1, 21, 2});
  REQUIRE(f.planner.next_retry().has_value());
  CHECK(*f.planner.next_retry() == f.clock.now() + 100ms);
  CHECK(state_of(f.planner.configured_destinations(), "metered")->held_by == Limit::rate);
  f.clock.advance(99ms);
  CHECK(f.take().empty());
  f.clock.advance(1ms);
  CHECK(f.take() == Ids{3});
  // Over a second, as many rows as the rate gives, whatever the outcomes.
  std::size_t sent = 0;
  for (int tick = 0; tick < 100; ++tick) {
    f.clock.advance(10ms);
    for (const auto id : f.take()) {
      f.accept(id);
      ++sent;
    }
  }
  CHECK(sent == 10);
}

TEST_CASE("A token bucket fills at its rate up to its burst", "[dispatch][limits]") {
  core::ManualClock clock;
  TokenBucket bucket(100, 5, clock.now());
  CHECK(bucket.available(clock.now()) == 5);
  for (int i = 0; i < 5; ++i) bucket.take(clock.now());
  CHECK_FALSE(bucket.ready(clock.now()));
  CHECK(bucket.next_token() == clock.now() + 10ms);
  clock.advance(1s);
  CHECK(bucket.available(clock.now()) == 5);
  bucket.change(100, 2, clock.now());
  CHECK(bucket.available(clock.now()) == 2);
  bucket.change(100, 50, clock.now());
  CHECK(bucket.available(clock.now()) == 2);  // a larger burst fills with time, not at once
  CHECK(effective_burst(rate(200, 0)) == 20);
  CHECK(effective_burst(rate(3, 0)) == 1);
}

TEST_CASE("A reload applies new limits and classes to the rows held", "[dispatch][planner][limits]") {
  auto policy = with_destination(test_policy(), "slow", in_flight_limit(1));
  PlannerFixture f(policy);
  for (core::RowId id = 1; id <= 4; ++id) f.add({to("slow", id)});
  for (core::RowId id = 5; id <= 8; ++id) f.add({to("bulk", id)});
  policy.window = 3;
  f.planner.set_policy(policy);
  CHECK(f.take() == Ids{1, 5, 6});
  policy.destinations["slow"] = priority(1);
  f.planner.set_policy(policy);
  f.accept(5);
  f.accept(6);
  // No limit now, and a class above bulk's: the held rows go first.
  CHECK(f.take() == Ids{2, 3});
  CHECK(state_of(f.planner.configured_destinations(), "slow")->held_by == Limit::none);
}

TEST_CASE("A limited destination with enough rows waiting is left out of the claims, and out of the room",
          "[dispatch][planner][limits]") {
  auto policy = with_destination(test_policy(), "slow", in_flight_limit(1));
  policy.max_buffered = 80;  // limited_buffer() is 10
  PlannerFixture f(policy);
  REQUIRE(f.planner.limited_buffer() == 10);
  for (core::RowId id = 1; id <= 9; ++id) f.add({to("slow", id)});
  CHECK(f.planner.held_back().empty());
  CHECK(f.planner.claim_room() == 80);
  for (core::RowId id = 10; id <= 12; ++id) f.add({to("slow", id)});
  CHECK(f.planner.held_back() == std::vector<std::string>{"slow"});
  CHECK(f.planner.claim_room() == 80 - 2);
  f.take();
  CHECK(f.planner.claim_room() == 80 - 2);  // 11 waiting, counted up to 10; 1 in flight
  f.add({to("other", 13)});
  CHECK(f.planner.claim_room() == 80 - 3);
}

}  // namespace outboxd::dispatch::test
