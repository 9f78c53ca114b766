// The wake-ups NOTIFY may cause: free until empty claims pile up, then one per gap.
#include "dispatch/notify_budget.hpp"

#include <algorithm>

namespace outboxd::dispatch {

core::SteadyTime NotifyBudget::claim_at(core::SteadyTime now) const {
  if (empty_ < kFreeEmpty) return now;
  return std::max(now, last_empty_ + kGap);
}

void NotifyBudget::on_claim(std::size_t rows, core::SteadyTime now) {
  if (rows > 0) {
    empty_ = 0;
    return;
  }
  ++empty_;
  last_empty_ = now;
}

}  // namespace outboxd::dispatch
