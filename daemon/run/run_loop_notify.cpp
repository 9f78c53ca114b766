// Asking writers to NOTIFY (the instance row's idle flag) and watching the transactions that may have missed it.
#include "daemon/run/run_loop.hpp"

namespace outboxd::daemon {

void RunLoop::arm_notify(bool armed) {
  if (auto set = db_.rows().arm_notify(instance_id_, armed); !set) return fail_database(set.error());
  notify_armed_ = armed;
  if (!armed) return late_commits_.clear();
  // Read after the arming committed: whoever is still open may have inserted
  // without NOTIFY and may commit after the claim that follows.
  auto open = db_.rows().open_transactions();
  if (!open) return fail_database(open.error());
  late_commits_.watch(std::move(open).value(), clock_.now());
}

void RunLoop::check_late_commits() {
  if (!late_commits_.check_due(clock_.now()) || !db_.up()) return;
  auto open = db_.rows().still_open(late_commits_.watched());
  if (!open) return fail_database(open.error());
  if (late_commits_.update(std::move(open).value(), clock_.now())) book_.expect_rows();
}

}  // namespace outboxd::daemon
