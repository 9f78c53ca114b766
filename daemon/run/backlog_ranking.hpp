// When the backlog measurement ranks the destinations, and what it keeps from one ranking to the next.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "pg/outbox_store.hpp"

namespace outboxd::daemon {

// Past the bound on destinations with series, choosing which ones get them
// (pg::OutboxStore::backlog, the ranking) reads every destination's rows up to
// the count cap: most of a second at 10,000 destinations, while the loop
// neither claims nor marks. So a ranking's choice holds for kPeriod, and the
// measurements in between read only the destinations it chose
// (pg::OutboxStore::backlog_of), at the cost of a measurement of that many
// destinations. While every destination fits, nothing is ranked or kept:
// each measurement lists them all, as it finds them.
class BacklogRanking {
 public:
  // Time, not a number of measurements: the loop stalls for a ranking at
  // most once a minute whatever http.backlog_interval_ms is (every 12th
  // measurement at its default, 5 s). A destination that grows a backlog
  // gets its series within a minute and an interval, well inside the 5
  // minutes OutboxdLagHigh waits.
  static constexpr std::chrono::seconds kPeriod{60};

  // Whether the measurement at `now` ranks rather than reads chosen(): the
  // first one, each one while no choice holds, and the first one kPeriod or
  // more after the last ranking.
  bool due(core::SteadyTime now) const;
  // The destinations the ranking in force chose, by name; empty while none holds.
  const std::vector<std::string>& chosen() const { return chosen_; }

  // Takes a ranking's report, made at `now`, and returns it to publish. Its
  // choice holds only if it left destinations out.
  pg::BacklogReport ranked(pg::BacklogReport report, core::SteadyTime now);
  // Takes the report of a measurement of chosen() and returns it to publish:
  // with the last ranking's count of destinations left out while more
  // destinations have rows than fit; as it is once they all fit again (it
  // lists every one then), and the choice no longer holds.
  pg::BacklogReport between(pg::BacklogReport report);

 private:
  void forget();

  std::optional<core::SteadyTime> ranked_at_;  // of the choice in force
  std::vector<std::string> chosen_;
  std::int64_t left_out_ = 0;  // by the ranking in force
};

}  // namespace outboxd::daemon
