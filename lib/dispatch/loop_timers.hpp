// The run loop's timers in one set: which are due, and how long the loop may sleep until the earliest.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <optional>

#include "core/clock.hpp"

namespace outboxd::dispatch {

// Every deadline that can end the loop's sleep. The loop's own steps set the
// first ones; the followed ones belong to another part (the planner, the
// lease book, the database connection...) and the loop copies them in before it
// sleeps, so that one set answers "what is due" and "when is the next".
enum class Timer : std::size_t {
  poll,           // dispatch.poll_interval_ms: claim even without a NOTIFY
  scheduled,      // the next scheduled row falls due: claim it
  busy_claim,     // dispatch.busy_poll_ms after a short claim while rows pour in
  notified,       // a NOTIFY held back by NotifyBudget may wake a claim
  mark,           // the oldest unmarked decision is old enough to be marked
  purge,          // retention.purge_interval_ms
  backlog,        // http.backlog_interval_ms
  stats,          // dispatch.stats_interval_ms
  stop,           // the shutdown deadline (dispatch.shutdown_timeout_ms after SIGTERM)
  // Followed:
  retry,          // the planner's next backed-off row
  ping,           // the service manager's watchdog ping
  lease_expiry,   // publishing stops at the lease fence
  reconnect,      // the next attempt to reach the database
  lease_renewal,  // the next lease balance
  late_commit,    // the next look at transactions open when NOTIFY was armed
  standby,        // the next look at the standby's flushed position
  lanes,          // the next claim by destination while a backlog leaves no room (RowBook)
};
// A timer added after lanes must take its place here.
inline constexpr std::size_t kTimerCount = static_cast<std::size_t>(Timer::lanes) + 1;

// A timer is set (to a time) or clear (it never fires).
class LoopTimers {
 public:
  void set(Timer timer, core::SteadyTime at) { at_[index(timer)] = at; }
  // Sets it unless it is set to an earlier time already.
  void set_earlier(Timer timer, core::SteadyTime at);
  // Copies a followed deadline: set to it, or clear without one.
  void follow(Timer timer, std::optional<core::SteadyTime> at) { at_[index(timer)] = at; }
  void clear(Timer timer) { at_[index(timer)].reset(); }

  std::optional<core::SteadyTime> at(Timer timer) const { return at_[index(timer)]; }
  bool due(Timer timer, core::SteadyTime now) const;
  // Due: clears it and returns true (the caller acts on it once).
  bool fire(Timer timer, core::SteadyTime now);

  // The earliest of the timers that can end a sleep. While the database is
  // down the steps that write to it skip their turn and leave their timers in
  // the past: only the reconnect counts of them, or the loop would spin until
  // the database is back. While it is up there is nothing to reconnect.
  std::optional<core::SteadyTime> earliest(bool database_up) const;

 private:
  static std::size_t index(Timer timer) { return static_cast<std::size_t>(timer); }
  std::array<std::optional<core::SteadyTime>, kTimerCount> at_{};
};

// Upper bound on one sleep while stopping, so that the loop sees the
// outcomes arrive and the deadline pass.
inline constexpr std::chrono::milliseconds kStopTick{50};

// How long the loop may sleep: until the earliest timer, rounded up to whole
// milliseconds (a timer in the past: not at all); while stopping, at most
// kStopTick and never past the stop deadline. With no timer set, not at all
// (the loop's poll timer is always set once it has started).
std::chrono::milliseconds sleep_budget(const LoopTimers& timers, core::SteadyTime now, bool database_up);

}  // namespace outboxd::dispatch
