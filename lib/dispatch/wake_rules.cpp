// The wake-up rules: arming NOTIFY before a sleep, and what follows a claim.
#include "dispatch/wake_rules.hpp"

namespace outboxd::dispatch {

BeforeSleep before_sleep(const BeforeSleepState& s) {
  if (s.claim_possible) return BeforeSleep::claim;
  const bool caught_up = !s.claim_may_find_rows && s.database_up && !s.stopping;
  if (caught_up && !s.notify_armed && s.notifications && !s.busy) return BeforeSleep::arm_notify;
  return BeforeSleep::sleep;
}

AfterClaim after_claim(bool full, bool busy, bool notify_armed) {
  if (full) return {.disarm_notify = notify_armed};
  return {.disarm_notify = busy && notify_armed, .follow_scheduled = true, .busy_claim = busy};
}

}  // namespace outboxd::dispatch
