// NodeRotation: the order nodes are tried in, the wait per round of failures, and when the count starts afresh.
#include <catch2/catch.hpp>

#include <chrono>
#include <vector>

#include "core/clock.hpp"
#include "dispatch/node_rotation.hpp"

using namespace std::chrono_literals;
using outboxd::core::Duration;
using outboxd::core::FixedRandom;
using outboxd::core::ManualClock;
using outboxd::dispatch::BackoffPolicy;
using outboxd::dispatch::NodeRotation;

namespace {

constexpr BackoffPolicy kPolicy{100ms, 1s, 2.0, 0.2};
constexpr Duration kStable = 1s;

// One failure at the clock's time: the node tried next and the wait before trying it.
struct Step {
  std::size_t node;
  Duration wait;
  bool operator==(const Step&) const = default;
};

Step fail(NodeRotation& rotation, ManualClock& clock, FixedRandom& random) {
  const auto at = rotation.failed(clock.now(), random);
  const Step step{rotation.current(), at - clock.now()};
  clock.advance(step.wait);
  return step;
}

}  // namespace

TEST_CASE("NodeRotation tries the next node at once and backs off after a whole round", "[dispatch][rotation]") {
  ManualClock clock;
  FixedRandom random(0.5);  // no jitter
  NodeRotation rotation(3, kPolicy, kStable);
  CHECK(rotation.current() == 0);
  std::vector<Step> steps;
  for (int i = 0; i < 9; ++i) steps.push_back(fail(rotation, clock, random));
  CHECK(steps == std::vector<Step>{{1, 0ms}, {2, 0ms}, {0, 100ms},   // round 1 ends: reconnect_min
                                   {1, 0ms}, {2, 0ms}, {0, 200ms},   // round 2: doubled
                                   {1, 0ms}, {2, 0ms}, {0, 400ms}});
}

TEST_CASE("NodeRotation with one node is the single-URL backoff", "[dispatch][rotation]") {
  ManualClock clock;
  FixedRandom random(0.5);
  NodeRotation rotation(1, kPolicy, kStable);
  std::vector<Step> steps;
  for (int i = 0; i < 6; ++i) steps.push_back(fail(rotation, clock, random));
  CHECK(steps == std::vector<Step>{{0, 100ms}, {0, 200ms}, {0, 400ms}, {0, 800ms}, {0, 1s}, {0, 1s}});
  NodeRotation none(0, kPolicy, kStable);  // counts as one node
  CHECK(fail(none, clock, random) == Step{0, 100ms});
}

TEST_CASE("NodeRotation stays on the node that works and moves on when it is lost", "[dispatch][rotation]") {
  ManualClock clock;
  FixedRandom random(0.5);
  NodeRotation rotation(3, kPolicy, kStable);
  CHECK(fail(rotation, clock, random) == Step{1, 0ms});  // node 0 refused
  rotation.connected(clock.now());
  clock.advance(kStable);
  // Up long enough: its loss starts afresh, and the next node goes at once (no return to node 0 first).
  CHECK(fail(rotation, clock, random) == Step{2, 0ms});
  CHECK(fail(rotation, clock, random) == Step{0, 0ms});
  CHECK(fail(rotation, clock, random) == Step{1, 100ms});  // 2, 0 and 1 failed: one round
}

TEST_CASE("NodeRotation counts a connection lost before stable_after as a failure", "[dispatch][rotation]") {
  ManualClock clock;
  FixedRandom random(0.5);
  NodeRotation rotation(2, kPolicy, kStable);
  // Each node accepts, then drops the connection at once: the rounds still back off.
  std::vector<Step> steps;
  for (int i = 0; i < 6; ++i) {
    rotation.connected(clock.now());
    clock.advance(10ms);
    steps.push_back(fail(rotation, clock, random));
  }
  CHECK(steps == std::vector<Step>{{1, 0ms}, {0, 100ms}, {1, 0ms}, {0, 200ms}, {1, 0ms}, {0, 400ms}});
}

TEST_CASE("NodeRotation keeps the capped wait in an outage of any length", "[dispatch][rotation]") {
  ManualClock clock;
  FixedRandom random(0.5);
  NodeRotation rotation(3, kPolicy, kStable);
  Duration longest = 0ms;
  for (int i = 0; i < 100'000; ++i) longest = std::max(longest, fail(rotation, clock, random).wait);
  CHECK(longest == 1s);
  CHECK(fail(rotation, clock, random).wait == 0ms);  // still a round of three: 100'001 is not a multiple of 3
  random.set(1.0);  // the jitter's top: still within reconnect_max
  for (int i = 0; i < 3; ++i) longest = std::max(longest, fail(rotation, clock, random).wait);
  CHECK(longest == 1s);
}

TEST_CASE("NodeRotation stable at once (the probe connection's) backs off only while connections never open",
          "[dispatch][rotation]") {
  ManualClock clock;
  FixedRandom random(0.5);
  NodeRotation rotation(1, kPolicy, Duration::zero());
  // Refused: the wait doubles.
  CHECK(fail(rotation, clock, random) == Step{0, 100ms});
  CHECK(fail(rotation, clock, random) == Step{0, 200ms});
  // Opened, then ended over a suspect: that is the probe's job, and the count starts afresh each time.
  for (int i = 0; i < 3; ++i) {
    rotation.connected(clock.now());
    clock.advance(3s);
    CHECK(fail(rotation, clock, random) == Step{0, 100ms});
  }
  CHECK(fail(rotation, clock, random) == Step{0, 200ms});  // refused again
}
