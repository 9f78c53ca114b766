// Housekeeping between claims: leases, retention purge, backlog figures, stats and health.
#include "daemon/run/run_loop.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace outboxd::daemon {

using dispatch::Timer;
using std::chrono::milliseconds;

void RunLoop::keep_leases() {
  if (!db_.up() || stopping_) return;
  std::vector<int> stopped;
  std::vector<int> gained;
  if (auto kept = leases_.maintain(db_.leases(), stopped, gained); !kept) return fail_database(kept.error());
  book_.drop_partitions(stopped);
  if (!gained.empty()) book_.restart_pass();  // rows of a new partition may lie below the cursor
  hand_back_drained();
}

// A draining partition is handed back once none of its rows is held any more.
void RunLoop::hand_back_drained() {
  const auto& draining = leases_.draining();
  if (draining.empty() || !db_.up()) return;
  const auto drained = book_.drained(draining);
  if (auto handed = leases_.hand_back_drained(db_.leases(), drained); !handed) fail_database(handed.error());
}

void RunLoop::update_health() {
  const auto now = clock_.now();
  metrics::beat(health_, now);
  health_.database_up = db_.up();
  health_.broker_up = broker_up_;
  health_.leases_held = leases_.may_publish();
  metrics_.in_flight.set(static_cast<std::int64_t>(book_.in_flight()));
  metrics_.buffered.set(static_cast<std::int64_t>(book_.buffered()));
  metrics_.partitions.set(static_cast<std::int64_t>(leases_.partitions().size()));
  metrics_.database_up.set(health_.database_up ? 1 : 0);
  metrics_.broker_up.set(health_.broker_up ? 1 : 0);
}

void RunLoop::purge_finished() {
  if (!db_.up() || stopping_) return;
  if (auto purged = decisions_.purge(); !purged) fail_database(purged.error());
}

// The figures cover the partitions this instance holds: those it claims from
// and those draining, which no other instance may hold yet. Past the bound on
// destinations, which ones are measured is chosen at most once a period
// (BacklogRanking): the ranking costs far more than the figures.
void RunLoop::measure_backlog() {
  const auto now = clock_.now();
  if (!timers_.due(Timer::backlog, now) || !db_.up() || stopping_) return;
  timers_.set(Timer::backlog, now + config_.http.backlog_interval);
  auto leased = leases_.partitions();
  leased.insert(leased.end(), leases_.draining().begin(), leases_.draining().end());
  const bool rank = backlog_ranking_.due(now);
  auto report = rank ? db_.rows().backlog(leased, BacklogMetrics::kCountCap, BacklogMetrics::kMaxDestinations)
                     : db_.rows().backlog_of(leased, BacklogMetrics::kCountCap, BacklogMetrics::kMaxDestinations,
                                             backlog_ranking_.chosen());
  if (!report) return fail_database(report.error());
  backlog_.duration.observe(std::chrono::duration<double>(clock_.now() - now).count());
  backlog_.publish(rank ? backlog_ranking_.ranked(std::move(report).value(), now)
                        : backlog_ranking_.between(std::move(report).value()));
}

// Measured only for /metrics, and not at all with backlog_interval_ms 0.
void RunLoop::schedule_backlog(core::SteadyTime now) {
  const auto interval = config_.http.backlog_interval;
  if (config_.http.listen.empty() || interval.count() == 0) {
    timers_.clear(Timer::backlog);
    backlog_.clear();
    backlog_ranking_ = {};  // turned on again, it ranks at once
    return;
  }
  timers_.set_earlier(Timer::backlog, now + interval);
}

void RunLoop::log_stats() {
  const auto now = clock_.now();
  if (!timers_.due(Timer::stats, now)) return;
  report_status(true);
  const double seconds = std::chrono::duration<double>(config_.dispatch.stats_interval).count();
  const auto& totals = decisions_.totals();
  const auto delta = totals.dispatched - last_stats_.dispatched;
  if (delta > 0 || book_.in_flight() > 0 || book_.buffered() > 0) {
    spdlog::info("dispatched {} ({:.0f}/s), in flight {}, buffered {}, retried {}, parked {}", delta,
                 static_cast<double>(delta) / seconds, book_.in_flight(), book_.buffered(),
                 totals.retried - last_stats_.retried, totals.parked - last_stats_.parked);
  }
  last_stats_ = totals;
  schedule_stats(now);
}

// stats_interval_ms 0 turns the stats line off (and its status refresh).
void RunLoop::schedule_stats(core::SteadyTime now) {
  const auto interval = config_.dispatch.stats_interval;
  if (interval.count() > 0) timers_.set(Timer::stats, now + interval);
  else timers_.clear(Timer::stats);
}

}  // namespace outboxd::daemon
