// When the loop sleeps and what wakes it: the wake-up rules and the timer set applied to the ports.
#include "daemon/run/run_loop.hpp"

#include "dispatch/wake_rules.hpp"

namespace outboxd::daemon {

using dispatch::Timer;

// The deadlines other parts own, copied in before the sleep is measured.
void RunLoop::follow_timers() {
  timers_.follow(Timer::retry, book_.next_retry());
  timers_.follow(Timer::ping, reporting_.next_ping());
  timers_.follow(Timer::lease_expiry,
                 leases_.may_publish() ? std::optional(leases_.valid_until()) : std::nullopt);
  timers_.follow(Timer::reconnect, ports_.database.next_attempt());
  timers_.set(Timer::lease_renewal, leases_.next_renewal());
  claims_.follow_timers();
}

void RunLoop::sleep_until_next_event() {
  auto& db = ports_.database;
  const auto decision = dispatch::before_sleep({.claim_possible = claims_.possible(stopping_),
                                                .claim_may_find_rows = book_.claim_may_find_rows(),
                                                .notify_armed = claims_.notify_armed(),
                                                .notifications = db.notifications(),
                                                .busy = claims_.busy(),
                                                .database_up = db.up(),
                                                .stopping = stopping_});
  if (decision == dispatch::BeforeSleep::claim) return;
  if (decision == dispatch::BeforeSleep::arm_notify) {
    claims_.arm_notify(true);
    book_.expect_rows();
    if (claims_.possible(stopping_)) return;
  }
  // libpq reads a NOTIFY that arrives during a statement along with its
  // results and queues it: the socket will not become readable for it.
  if (db.drain_notifications()) {
    claims_.on_notified();
    if (claims_.possible(stopping_)) return;
  }
  follow_timers();
  const auto ready = ports_.events.wait(db.socket(), dispatch::sleep_budget(timers_, ports_.clock.now(), db.up()));
  if (ready.database && db.drain_notifications()) claims_.on_notified();
  const auto now = ports_.clock.now();
  if (timers_.fire(Timer::poll, now)) {
    book_.expect_rows();
    timers_.set(Timer::poll, now + config_.dispatch.poll_interval);
  }
  if (timers_.fire(Timer::scheduled, now)) book_.expect_rows();
  if (timers_.fire(Timer::busy_claim, now)) book_.expect_rows();
  if (timers_.fire(Timer::notified, now)) claims_.on_notified();
  claims_.check_late_commits();
}

}  // namespace outboxd::daemon
