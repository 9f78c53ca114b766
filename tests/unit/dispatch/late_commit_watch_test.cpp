// LateCommitWatch: check times with backoff, and when to claim again.
#include <catch2/catch.hpp>

#include "dispatch/late_commit_watch.hpp"

using namespace std::chrono_literals;
using outboxd::core::ManualClock;
using outboxd::dispatch::LateCommitWatch;

TEST_CASE("Nothing open when arming: nothing to watch", "[dispatch][late_commit]") {
  ManualClock clock;
  LateCommitWatch watch(10ms, 1s);
  watch.watch({}, clock.now());
  CHECK_FALSE(watch.next_check().has_value());
  CHECK_FALSE(watch.check_due(clock.now() + 1h));
}

TEST_CASE("Open transactions are checked with a doubling delay until they end", "[dispatch][late_commit]") {
  ManualClock clock;
  const auto t0 = clock.now();
  LateCommitWatch watch(10ms, 50ms);
  watch.watch({"100", "101"}, t0);
  CHECK(watch.next_check() == t0 + 10ms);
  CHECK_FALSE(watch.check_due(t0 + 9ms));
  CHECK(watch.check_due(t0 + 10ms));

  clock.advance(10ms);
  CHECK_FALSE(watch.update({"100", "101"}, clock.now()));  // none ended: no claim
  CHECK(watch.next_check() == clock.now() + 20ms);
  clock.advance(20ms);
  CHECK_FALSE(watch.update({"100", "101"}, clock.now()));
  CHECK(watch.next_check() == clock.now() + 40ms);
  clock.advance(40ms);
  CHECK_FALSE(watch.update({"100", "101"}, clock.now()));
  CHECK(watch.next_check() == clock.now() + 50ms);  // capped

  clock.advance(50ms);
  CHECK(watch.update({"101"}, clock.now()));  // 100 ended: claim again
  CHECK(watch.next_check() == clock.now() + 10ms);  // and look again soon
  CHECK(watch.watched() == std::vector<std::string>{"101"});

  clock.advance(10ms);
  CHECK(watch.update({}, clock.now()));
  CHECK_FALSE(watch.next_check().has_value());
}

TEST_CASE("Arming again replaces the set; clear forgets it", "[dispatch][late_commit]") {
  ManualClock clock;
  LateCommitWatch watch(10ms, 1s);
  watch.watch({"1"}, clock.now());
  clock.advance(10ms);
  watch.update({"1"}, clock.now());
  watch.watch({"2", "3"}, clock.now());
  CHECK(watch.next_check() == clock.now() + 10ms);
  CHECK(watch.watched().size() == 2);
  watch.clear();
  CHECK_FALSE(watch.next_check().has_value());
  CHECK(watch.watched().empty());
}
