// When the planner's statistics of the outbox are too old for the claim's plans: a pass read more rows than they count.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/clock.hpp"

namespace outboxd::dispatch {

// The daemon's statements use generic plans, made from the planner's
// statistics of the messages table. While those count the table as empty
// (it was analyzed drained), a bulk committed since is read with plans made
// for an empty table, which walk the wrong index over the whole bulk; and
// autovacuum's ANALYZE comes long after a bulk lands. A pass that has read
// more rows than the statistics say the table holds proves them stale: the
// loop then has them refreshed (pg::OutboxStore::refresh_statistics), at
// most once per kMinInterval, as a table that fills and drains all the time
// would otherwise be analyzed at every burst.
class StatisticsWatch {
 public:
  static constexpr std::chrono::seconds kMinInterval{60};

  // After each claim of a pass: `rows` claimed in it so far, `table_rows`
  // the statistics' count (none: unknown). True: refresh them now.
  bool stale(std::size_t rows, std::optional<std::int64_t> table_rows, core::SteadyTime now);

 private:
  std::optional<core::SteadyTime> last_refresh_;
};

}  // namespace outboxd::dispatch
