// The backlog measurement: its timer, the ranking or the chosen destinations read, the figures published.
#include "daemon/run/backlog_step.hpp"

#include <utility>

namespace outboxd::daemon {

using dispatch::Timer;

BacklogStep::Settings BacklogStep::settings_of(const config::Config& config) {
  return {.served = !config.http.listen.empty(), .interval = config.http.backlog_interval};
}

BacklogStep::BacklogStep(Settings settings, metrics::Registry& registry, Database& db, const LeaseKeeper& leases,
                         dispatch::LoopTimers& timers, const core::Clock& clock, Fail fail)
    : settings_(settings), figures_(registry), db_(db), leases_(leases), timers_(timers), clock_(clock),
      fail_(std::move(fail)) {
  if (settings_.served && settings_.interval.count() > 0) timers_.set(Timer::backlog, clock_.now());  // at once
}

void BacklogStep::set_settings(Settings settings) {
  settings_ = settings;
  schedule(clock_.now());
}

void BacklogStep::schedule(core::SteadyTime now) {
  if (!settings_.served || settings_.interval.count() == 0) {
    timers_.clear(Timer::backlog);
    figures_.clear();
    ranking_ = {};  // turned on again, it ranks at once
    return;
  }
  timers_.set_earlier(Timer::backlog, now + settings_.interval);
}

void BacklogStep::measure(bool stopping) {
  const auto now = clock_.now();
  if (!timers_.due(Timer::backlog, now) || !db_.up() || stopping) return;
  timers_.set(Timer::backlog, now + settings_.interval);
  auto leased = leases_.partitions();
  leased.insert(leased.end(), leases_.draining().begin(), leases_.draining().end());
  const bool rank = ranking_.due(now);
  auto report = rank ? db_.rows().backlog(leased, BacklogMetrics::kCountCap, BacklogMetrics::kMaxDestinations)
                     : db_.rows().backlog_of(leased, BacklogMetrics::kCountCap, BacklogMetrics::kMaxDestinations,
                                             ranking_.chosen());
  if (!report) return fail_(report.error());
  figures_.duration.observe(std::chrono::duration<double>(clock_.now() - now).count());
  std::int64_t rows = 0;
  for (const auto& destination : report.value().destinations) {
    rows += destination.due + destination.scheduled + destination.retrying;
  }
  rows_ = rows;
  figures_.publish(rank ? ranking_.ranked(std::move(report).value(), now)
                        : ranking_.between(std::move(report).value()));
}

}  // namespace outboxd::daemon
