// The wake-up rules: when NOTIFY is armed before a sleep, and what follows a full or a short claim.
#include <catch2/catch.hpp>

#include "dispatch/wake_rules.hpp"

using outboxd::dispatch::after_claim;
using outboxd::dispatch::before_sleep;
using outboxd::dispatch::BeforeSleep;
using outboxd::dispatch::BeforeSleepState;

namespace {

// Caught up, connected, NOTIFY available and not yet armed: the state that arms.
BeforeSleepState caught_up() {
  return {.claim_possible = false, .claim_may_find_rows = false, .notify_armed = false, .notifications = true,
          .busy = false, .database_up = true, .stopping = false};
}

}  // namespace

TEST_CASE("A possible claim runs before any sleep", "[dispatch][wakeup]") {
  auto state = caught_up();
  state.claim_possible = true;
  state.claim_may_find_rows = true;
  CHECK(before_sleep(state) == BeforeSleep::claim);
}

TEST_CASE("Caught up the loop arms NOTIFY once and then sleeps", "[dispatch][wakeup]") {
  auto state = caught_up();
  CHECK(before_sleep(state) == BeforeSleep::arm_notify);
  state.notify_armed = true;
  CHECK(before_sleep(state) == BeforeSleep::sleep);
}

TEST_CASE("NOTIFY is not armed while rows pour in", "[dispatch][wakeup]") {
  auto busy = caught_up();
  busy.busy = true;  // the busy poll finds the rows; a NOTIFY per commit would slow writers
  CHECK(before_sleep(busy) == BeforeSleep::sleep);
}

TEST_CASE("NOTIFY is not armed without notifications or before the loop is caught up", "[dispatch][wakeup]") {
  auto no_listen = caught_up();
  no_listen.notifications = false;  // a transaction pooler without listen_url: the poll finds them
  CHECK(before_sleep(no_listen) == BeforeSleep::sleep);
  auto expecting = caught_up();
  expecting.claim_may_find_rows = true;  // rows expected but no room or no lease: not caught up
  CHECK(before_sleep(expecting) == BeforeSleep::sleep);
  auto down = caught_up();
  down.database_up = false;
  CHECK(before_sleep(down) == BeforeSleep::sleep);
  auto stopping = caught_up();
  stopping.stopping = true;
  CHECK(before_sleep(stopping) == BeforeSleep::sleep);
}

TEST_CASE("A full claim disarms NOTIFY and leaves the timers", "[dispatch][wakeup]") {
  const auto armed = after_claim(true, false, true);
  CHECK(armed.disarm_notify);
  CHECK_FALSE(armed.follow_scheduled);
  CHECK_FALSE(armed.busy_claim);
  CHECK_FALSE(after_claim(true, true, false).disarm_notify);  // not armed: nothing to clear
  CHECK_FALSE(after_claim(true, true, false).busy_claim);     // claims again at once anyway
}

TEST_CASE("A short claim waits for the next due row and polls busily while rows pour in", "[dispatch][wakeup]") {
  const auto quiet = after_claim(false, false, true);
  CHECK(quiet.follow_scheduled);
  CHECK_FALSE(quiet.disarm_notify);  // NOTIFY stays armed: it is how the next row wakes the loop
  CHECK_FALSE(quiet.busy_claim);
  const auto busy = after_claim(false, true, true);
  CHECK(busy.follow_scheduled);
  CHECK(busy.disarm_notify);
  CHECK(busy.busy_claim);
}
