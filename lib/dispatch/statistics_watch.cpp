// The statistics watch: a pass read more rows than the planner's statistics count, and none was refreshed lately.
#include "dispatch/statistics_watch.hpp"

namespace outboxd::dispatch {

bool StatisticsWatch::stale(std::size_t rows, std::optional<std::int64_t> table_rows, core::SteadyTime now) {
  if (!table_rows) return false;
  // -1: never analyzed; the planner then guesses from the table's size, which is no worse.
  if (*table_rows < 0 || rows <= static_cast<std::size_t>(*table_rows)) return false;
  if (last_refresh_ && now - *last_refresh_ < kMinInterval) return false;
  last_refresh_ = now;
  return true;
}

}  // namespace outboxd::dispatch
