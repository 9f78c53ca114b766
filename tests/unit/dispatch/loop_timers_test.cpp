// LoopTimers: set, clear and fire; the earliest timer with the database up or down; the sleep it allows.
#include <catch2/catch.hpp>

#include "dispatch/loop_timers.hpp"

using namespace std::chrono_literals;
using outboxd::core::ManualClock;
using outboxd::dispatch::LoopTimers;
using outboxd::dispatch::sleep_budget;
using outboxd::dispatch::Timer;

TEST_CASE("A timer fires once it is reached and once only", "[dispatch][timers]") {
  ManualClock clock;
  const auto t0 = clock.now();
  LoopTimers timers;
  CHECK_FALSE(timers.due(Timer::scheduled, t0 + 1h));  // clear: never
  timers.set(Timer::scheduled, t0 + 10ms);
  CHECK_FALSE(timers.due(Timer::scheduled, t0 + 9ms));
  CHECK_FALSE(timers.fire(Timer::scheduled, t0 + 9ms));
  CHECK(timers.due(Timer::scheduled, t0 + 10ms));
  CHECK(timers.fire(Timer::scheduled, t0 + 10ms));
  CHECK_FALSE(timers.at(Timer::scheduled).has_value());
  CHECK_FALSE(timers.fire(Timer::scheduled, t0 + 11ms));
}

TEST_CASE("set_earlier keeps an earlier time and follow copies or clears", "[dispatch][timers]") {
  ManualClock clock;
  const auto t0 = clock.now();
  LoopTimers timers;
  timers.set_earlier(Timer::mark, t0 + 5ms);  // unset: set
  CHECK(timers.at(Timer::mark) == t0 + 5ms);
  timers.set_earlier(Timer::mark, t0 + 8ms);  // the oldest decision stays the one that counts
  CHECK(timers.at(Timer::mark) == t0 + 5ms);
  timers.set_earlier(Timer::mark, t0 + 2ms);
  CHECK(timers.at(Timer::mark) == t0 + 2ms);
  timers.follow(Timer::retry, t0 + 1s);
  CHECK(timers.at(Timer::retry) == t0 + 1s);
  timers.follow(Timer::retry, std::nullopt);
  CHECK_FALSE(timers.at(Timer::retry).has_value());
}

TEST_CASE("Every timer can end a sleep", "[dispatch][timers]") {
  ManualClock clock;
  const auto t0 = clock.now();
  for (const auto timer : {Timer::poll, Timer::scheduled, Timer::busy_claim, Timer::notified, Timer::mark, Timer::purge,
                           Timer::backlog, Timer::stats, Timer::retry, Timer::ping, Timer::lease_expiry,
                           Timer::lease_renewal, Timer::late_commit, Timer::standby, Timer::lanes}) {
    LoopTimers timers;
    timers.set(Timer::poll, t0 + 60s);
    timers.set(timer, t0 + 3ms);
    INFO("timer " << static_cast<int>(timer));
    CHECK(timers.earliest(true) == t0 + 3ms);
    CHECK(sleep_budget(timers, t0, true) == 3ms);
  }
}

TEST_CASE("While the database is down only its reconnect counts of the timers that need it",
          "[dispatch][timers]") {
  ManualClock clock;
  const auto t0 = clock.now();
  LoopTimers timers;
  timers.set(Timer::poll, t0 + 60s);
  timers.set(Timer::reconnect, t0 + 500ms);
  // Left in the past by the steps that skip their turn while the database is down.
  for (const auto timer : {Timer::mark, Timer::purge, Timer::backlog, Timer::lease_renewal, Timer::late_commit,
                           Timer::standby}) {
    timers.set(timer, t0 - 1s);
  }
  CHECK(timers.earliest(false) == t0 + 500ms);
  CHECK(sleep_budget(timers, t0, false) == 500ms);
  timers.set(Timer::busy_claim, t0 + 3ms);  // not a database write: it still counts
  CHECK(sleep_budget(timers, t0, false) == 3ms);
  // Up: the database timers count and the reconnect does not.
  timers.clear(Timer::busy_claim);
  for (const auto timer : {Timer::mark, Timer::purge, Timer::backlog, Timer::lease_renewal, Timer::late_commit,
                           Timer::standby}) {
    timers.set(timer, t0 + 70s);
  }
  timers.set(Timer::reconnect, t0 + 1ms);
  CHECK(timers.earliest(true) == t0 + 60s);
}

TEST_CASE("The sleep rounds up to whole milliseconds and never goes negative", "[dispatch][timers]") {
  ManualClock clock;
  const auto t0 = clock.now();
  LoopTimers timers;
  CHECK(sleep_budget(timers, t0, true) == 0ms);  // nothing set: look again at once
  timers.set(Timer::poll, t0 + 2500us);
  CHECK(sleep_budget(timers, t0, true) == 3ms);
  CHECK(sleep_budget(timers, t0 + 1s, true) == 0ms);
}

TEST_CASE("While stopping the sleep is short and ends at the stop deadline", "[dispatch][timers]") {
  ManualClock clock;
  const auto t0 = clock.now();
  LoopTimers timers;
  timers.set(Timer::poll, t0 + 1ms);
  timers.set(Timer::stop, t0 + 30s);
  CHECK(sleep_budget(timers, t0, true) == outboxd::dispatch::kStopTick);  // the other timers no longer count
  CHECK(sleep_budget(timers, t0 + 30s - 20ms, true) == 20ms);
  CHECK(sleep_budget(timers, t0 + 31s, false) == 0ms);
  CHECK_FALSE(timers.earliest(true) == t0 + 30s);  // the deadline is no wake-up of its own
}
