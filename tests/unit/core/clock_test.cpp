// saturating_add at the limits of the clock types: waits from the database may be any length.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <limits>

#include "core/clock.hpp"

namespace outboxd::core {
namespace {

using std::chrono::milliseconds;

// The largest finite timestamptz (294276-12-31 23:59:59.999999 UTC) as seen
// from 2026: what time_to_next_due answers for a row due then.
constexpr milliseconds kLargestTimestampAway{9'222'521'847'121'565};
constexpr milliseconds k300Years{std::chrono::duration_cast<milliseconds>(std::chrono::years(300))};

}  // namespace

TEST_CASE("saturating_add: an ordinary wait is added exactly", "[core][clock]") {
  const SteadyTime t{std::chrono::hours(5)};
  CHECK(saturating_add(t, milliseconds(1500)) == t + milliseconds(1500));
  CHECK(saturating_add(t, milliseconds(0)) == t);
  CHECK(saturating_add(t, milliseconds(-20)) == t);  // overdue: now
}

TEST_CASE("saturating_add: waits beyond the clock's range end at its largest time point", "[core][clock]") {
  const SteadyTime boot{std::chrono::hours(1)};
  CHECK(saturating_add(boot, k300Years) == SteadyTime::max());
  CHECK(saturating_add(boot, kLargestTimestampAway) == SteadyTime::max());
  CHECK(saturating_add(boot, milliseconds::max()) == SteadyTime::max());
  CHECK(saturating_add(SteadyTime::max(), milliseconds(1)) == SteadyTime::max());
  CHECK(saturating_add(SteadyTime::min(), milliseconds::max()) == SteadyTime::max());
  CHECK(saturating_add(SteadyTime{}, milliseconds::max()) == SteadyTime::max());
}

TEST_CASE("saturating_add: up to the last millisecond that fits, the sum is exact", "[core][clock]") {
  const SteadyTime t{std::chrono::hours(1)};
  const auto room = std::chrono::floor<milliseconds>(SteadyTime::max() - t);
  CHECK(saturating_add(t, room - milliseconds(1)) == t + (room - milliseconds(1)));
  CHECK(saturating_add(t, room) == SteadyTime::max());
  // 200 years fit in a nanosecond steady_clock; the sum is later than now.
  const auto years200 = std::chrono::duration_cast<milliseconds>(std::chrono::years(200));
  CHECK(saturating_add(t, years200) > t);
  CHECK(saturating_add(SteadyTime::min(), milliseconds(5)) == SteadyTime::min() + milliseconds(5));
}

}  // namespace outboxd::core
