// The run loop's backlog measurement for /metrics: when it runs, what it reads, where its figures go.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "core/clock.hpp"
#include "core/result.hpp"
#include "daemon/run/backlog_metrics.hpp"
#include "daemon/run/backlog_ranking.hpp"
#include "daemon/run/lease_keeper.hpp"
#include "daemon/run/ports.hpp"
#include "dispatch/loop_timers.hpp"
#include "metrics/registry.hpp"

namespace outboxd::daemon {

// Every http.backlog_interval_ms, the backlog of the partitions this
// instance holds: those it claims from and those draining, which no other
// instance may hold yet. Past the bound on destinations, which ones are
// measured is chosen at most once a period (BacklogRanking): the ranking
// costs far more than the figures. Measured only for /metrics: not at all
// without http.listen or with the interval 0. It owns the loop's backlog
// timer; a failed statement goes to `fail` (the loop's).
class BacklogStep {
 public:
  // Its slice of the config, at start and after a reload.
  struct Settings {
    bool served = false;                  // http.listen is set
    std::chrono::milliseconds interval{};  // http.backlog_interval_ms; 0: off
  };
  static Settings settings_of(const config::Config& config);
  using Fail = std::function<void(const core::Error&)>;

  BacklogStep(Settings settings, metrics::Registry& registry, Database& db, const LeaseKeeper& leases,
              dispatch::LoopTimers& timers, const core::Clock& clock, Fail fail);
  // New settings take effect at once: the next measurement within the new interval, or none.
  void set_settings(Settings settings);

  // One measurement when due and the database is up, unless `stopping`.
  void measure(bool stopping);
  // Rows waiting at the last measurement: due, scheduled and retrying, of
  // the destinations it read (each count bounded); none before the first.
  std::optional<std::int64_t> rows() const { return rows_; }

 private:
  void schedule(core::SteadyTime now);

  Settings settings_;
  BacklogMetrics figures_;
  BacklogRanking ranking_;
  Database& db_;
  const LeaseKeeper& leases_;
  dispatch::LoopTimers& timers_;
  const core::Clock& clock_;
  Fail fail_;
  std::optional<std::int64_t> rows_;
};

}  // namespace outboxd::daemon
