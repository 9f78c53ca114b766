// When the loop sleeps and what wakes it: NOTIFY, the poll, due rows, busy polling, timers.
#include "daemon/run_loop.hpp"

#include <algorithm>

namespace outboxd::daemon {

namespace {

using std::chrono::milliseconds;

// Upper bound on one sleep while shutting down, so the deadline is checked.
constexpr milliseconds kStopTick{50};

milliseconds until(core::SteadyTime now, core::SteadyTime then) {
  return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(then - now));
}

}  // namespace

bool RunLoop::claim_possible() const {
  return book_.claim_may_find_rows() && !standby_.holding() && !stopping_ && db_.up() && leases_.may_publish() &&
         book_.room_for_claim(static_cast<std::size_t>(config_.dispatch.batch_size));
}

milliseconds RunLoop::sleep_budget() {
  const auto now = clock_.now();
  if (stopping_) return std::min(kStopTick, until(now, stop_deadline_));
  auto deadline = std::min(next_poll_, next_stats_);
  auto consider = [&](std::optional<core::SteadyTime> t) {
    if (t) deadline = std::min(deadline, *t);
  };
  consider(book_.next_retry());
  consider(next_due_);
  consider(service_.next_ping());
  consider(next_busy_claim_);
  if (leases_.may_publish()) consider(leases_.valid_until());
  if (!db_.up()) {
    // The steps that write to the database skip their turn while it is down
    // and leave their timers in the past: only the reconnect attempt counts,
    // or the loop would spin until the database is back.
    consider(db_.next_attempt());
    return until(now, deadline);
  }
  consider(next_purge_);
  consider(next_backlog_);
  consider(leases_.next_renewal());
  consider(late_commits_.next_check());
  consider(standby_.next_check());
  if (writes_since_) consider(*writes_since_ + kMarkDelay);
  return until(now, deadline);
}

void RunLoop::sleep_until_next_event() {
  if (claim_possible()) return;  // more to read right away
  if (!book_.claim_may_find_rows() && !notify_armed_ && db_.notifications() && !notify_policy_.busy() && db_.up() &&
      !stopping_) {
    // Caught up: ask writers to NOTIFY, then look once more, because a row
    // committed between the last claim and the arming sent no notification.
    // Without NOTIFY (a transaction pooler and no listen_url) writers are
    // never asked to send one, and the poll finds their rows.
    arm_notify(true);
    book_.expect_rows();
    if (claim_possible()) return;
  }
  // libpq reads a NOTIFY that arrives during a statement along with its
  // results and queues it: the socket will not become readable for it.
  if (db_.drain_notifications()) {
    book_.expect_rows();
    if (claim_possible()) return;
  }
  const auto ready = events_.wait(db_.socket(), sleep_budget());
  if (ready.database && db_.drain_notifications()) book_.expect_rows();
  const auto now = clock_.now();
  if (now >= next_poll_) {
    book_.expect_rows();
    next_poll_ = now + config_.dispatch.poll_interval;
  }
  if (next_due_ && now >= *next_due_) {
    book_.expect_rows();
    next_due_.reset();
  }
  if (next_busy_claim_ && now >= *next_busy_claim_) {
    book_.expect_rows();
    next_busy_claim_.reset();
  }
  check_late_commits();
}

}  // namespace outboxd::daemon
