// How often a NOTIFY may wake a claim: any login can send one, so a flood of them costs an idle daemon little.
#pragma once

#include <chrono>
#include <cstddef>

#include "core/clock.hpp"

namespace outboxd::dispatch {

// pg_notify() needs no privilege: any login of the database can send the
// wakeup channel a NOTIFY, in a loop, and each one would cost an idle
// daemon a claim. So a NOTIFY is taken at its word until kFreeEmpty claims
// in a row that NOTIFYs woke found no row; after that a NOTIFY wakes a
// claim no sooner than kGap after the last of them. A claim that finds rows
// ends the run. Writers' NOTIFYs rarely wake empty claims (several that
// arrive together wake one claim), so a row written at once after such a
// run waits kGap at most; the poll and the other wake-ups are not held.
class NotifyBudget {
 public:
  static constexpr int kFreeEmpty = 3;
  static constexpr std::chrono::milliseconds kGap{200};

  // When a NOTIFY that arrived at `now` may wake a claim: `now`, or later.
  core::SteadyTime claim_at(core::SteadyTime now) const;
  // A claim that a NOTIFY woke returned `rows` rows.
  void on_claim(std::size_t rows, core::SteadyTime now);

 private:
  int empty_ = 0;  // claims in a row that NOTIFYs woke and that found nothing
  core::SteadyTime last_empty_{};
};

}  // namespace outboxd::dispatch
