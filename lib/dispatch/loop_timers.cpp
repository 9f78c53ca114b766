// The run loop's timers: set, clear, due, and the earliest that may end a sleep.
#include "dispatch/loop_timers.hpp"

#include <algorithm>

namespace outboxd::dispatch {

namespace {

using std::chrono::milliseconds;

// Timers of steps that write to the database: they wait for it while it is down.
bool needs_database(Timer timer) {
  switch (timer) {
    case Timer::mark:
    case Timer::purge:
    case Timer::backlog:
    case Timer::lease_renewal:
    case Timer::late_commit:
    case Timer::standby:
    case Timer::lanes:
      return true;
    default:
      return false;
  }
}

milliseconds until(core::SteadyTime now, core::SteadyTime then) {
  return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(then - now));
}

}  // namespace

void LoopTimers::set_earlier(Timer timer, core::SteadyTime at) {
  auto& slot = at_[index(timer)];
  if (!slot || at < *slot) slot = at;
}

bool LoopTimers::due(Timer timer, core::SteadyTime now) const {
  const auto& slot = at_[index(timer)];
  return slot && now >= *slot;
}

bool LoopTimers::fire(Timer timer, core::SteadyTime now) {
  if (!due(timer, now)) return false;
  clear(timer);
  return true;
}

std::optional<core::SteadyTime> LoopTimers::earliest(bool database_up) const {
  std::optional<core::SteadyTime> first;
  for (std::size_t i = 0; i < kTimerCount; ++i) {
    const auto timer = static_cast<Timer>(i);
    if (!at_[i] || timer == Timer::stop) continue;
    if (database_up ? timer == Timer::reconnect : needs_database(timer)) continue;
    if (!first || *at_[i] < *first) first = at_[i];
  }
  return first;
}

milliseconds sleep_budget(const LoopTimers& timers, core::SteadyTime now, bool database_up) {
  if (const auto stop = timers.at(Timer::stop)) return std::min(kStopTick, until(now, *stop));
  const auto first = timers.earliest(database_up);
  return first ? until(now, *first) : milliseconds(0);
}

}  // namespace outboxd::dispatch
