// The loop's reports: the HTTP server started and stopped, the health and gauges, systemd's lines, the stats line.
#include "daemon/run/reporting.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

namespace outboxd::daemon {

using dispatch::Timer;

Reporting::Settings Reporting::settings_of(const config::Config& config) {
  return {.listen = config.http.listen,
          .poll_interval = config.dispatch.poll_interval,
          .stats_interval = config.dispatch.stats_interval,
          .redelivery_window = std::int64_t{config.dispatch.in_flight} + 2 * std::int64_t{config.dispatch.batch_size},
          .broker_dedup = config.broker.profile == config::BrokerProfile::artemis};
}

Reporting::Reporting(Settings settings, metrics::Registry& registry, Parts parts, RunLoopMetrics& metrics,
                     dispatch::LoopTimers& timers, const core::Clock& clock)
    : settings_(std::move(settings)), registry_(registry), parts_(parts), metrics_(metrics), timers_(timers),
      clock_(clock), service_(clock, settings_.service_manager) {}

void Reporting::set_settings(Settings settings) {
  settings_.poll_interval = settings.poll_interval;
  settings_.stats_interval = settings.stats_interval;  // listen and service_manager stay as started
  settings_.redelivery_window = settings.redelivery_window;
  metrics_.redelivery_window.set(settings_.redelivery_window);
  schedule_stats(clock_.now());
}

bool Reporting::start() {
  const auto now = clock_.now();
  metrics::beat(health_, now);
  schedule_stats(now);
  metrics_.redelivery_window.set(settings_.redelivery_window);
  // Said once per daemon: the broker's cache must outlast what a crash resends (docs/operations.md).
  if (settings_.broker_dedup && settings_.service_manager) {
    spdlog::info("duplicate detection: the broker's id-cache-size must be at least {} per address "
                 "(dispatch.in_flight + 2 * dispatch.batch_size) for what this instance may publish again "
                 "after a crash",
                 settings_.redelivery_window);
  }
  if (!settings_.listen.empty()) {
    // The loop may sleep a whole poll interval when idle: only a longer silence is a stall.
    const auto stale_after =
        std::chrono::ceil<std::chrono::seconds>(settings_.poll_interval) + std::chrono::seconds(30);
    http_ = std::make_unique<metrics::HttpServer>(registry_, health_, stale_after);
    if (auto listening = http_->start(settings_.listen); !listening) {
      spdlog::critical("{}", listening.error().message);
      return false;
    }
    spdlog::info("serving /metrics, /healthz and /readyz on {}", settings_.listen);
  }
  status(false, false);
  return true;
}

void Reporting::stop() {
  if (http_) http_->stop();
}

void Reporting::report(bool stopping) {
  if (!announced_ready_ && parts_.db.up() && parts_.publisher.up()) {
    service_.ready();
    announced_ready_ = true;
  }
  status(stopping, false);
  service_.keep_alive();
  update_health();
}

void Reporting::stopping() {
  health_.stopping = true;
  service_.stopping();
  status(true, false);  // the loop may end in this very turn
}

void Reporting::reloading() {
  if (announced_ready_) service_.reloading();
}

void Reporting::reloaded() {
  if (announced_ready_) service_.ready();
}

void Reporting::status(bool stopping, bool refresh) {
  const auto& book = parts_.book;
  if (stopping) return service_.status("stopping", fmt::format("{} in flight", book.in_flight()), refresh);
  if (!parts_.db.up()) return service_.status("connecting to the database", "", refresh);
  if (!parts_.publisher.up()) return service_.status("waiting for the broker", "", refresh);
  if (!parts_.leases.may_publish()) return service_.status("waiting for partition leases", "", refresh);
  if (const auto& standby = parts_.claims.standby(); standby.stalled()) {
    return service_.status("rows waiting for the standby",
                           fmt::format("{} claimed rows wait for database.wait_for_standby", standby.waiting_rows()),
                           refresh);
  }
  service_.status("dispatching",
                  fmt::format("{} in flight, {} dispatched", book.in_flight(), parts_.decisions.totals().dispatched),
                  refresh);
}

void Reporting::update_health() {
  metrics::beat(health_, clock_.now());
  health_.database_up = parts_.db.up();
  health_.broker_up = parts_.publisher.up();
  health_.leases_held = parts_.leases.may_publish();
  metrics_.in_flight.set(static_cast<std::int64_t>(parts_.book.in_flight()));
  metrics_.buffered.set(static_cast<std::int64_t>(parts_.book.buffered()));
  metrics_.partitions.set(static_cast<std::int64_t>(parts_.leases.partitions().size()));
  metrics_.database_up.set(health_.database_up ? 1 : 0);
  metrics_.broker_up.set(health_.broker_up ? 1 : 0);
  update_destinations();
}

// Series for the destinations destinations: names only, so their number is
// the operator's, never the writers'.
void Reporting::update_destinations() {
  const auto states = parts_.book.configured_destinations();
  if (states.empty() && !destination_series_) return;
  destination_series_ = !states.empty();
  std::vector<metrics::GaugeSet::Sample> policy, in_flight, held;
  for (const auto& state : states) {
    const auto& p = state.policy;
    const auto of = [&](const char* label, const char* value) {
      return metrics::Labels{{"destination", state.name}, {label, value}};
    };
    policy.emplace_back(of("setting", "priority"), p.priority);
    policy.emplace_back(of("setting", "max_rate"), p.max_rate);
    policy.emplace_back(of("setting", "burst"), p.max_rate > 0 ? dispatch::effective_burst(p) : 0.0);
    policy.emplace_back(of("setting", "max_in_flight"), static_cast<double>(p.max_in_flight));
    in_flight.emplace_back(metrics::Labels{{"destination", state.name}}, static_cast<double>(state.in_flight));
    if (p.max_rate > 0) {
      held.emplace_back(of("limit", "rate"),
                        state.held_by == dispatch::Limit::rate ? static_cast<double>(state.buffered) : 0.0);
    }
    if (p.max_in_flight > 0) {
      held.emplace_back(of("limit", "in_flight"),
                        state.held_by == dispatch::Limit::in_flight ? static_cast<double>(state.buffered) : 0.0);
    }
  }
  metrics_.destination_policy.replace(std::move(policy));
  metrics_.destination_in_flight.replace(std::move(in_flight));
  metrics_.destination_held_rows.replace(std::move(held));
}

void Reporting::log_stats(bool stopping) {
  const auto now = clock_.now();
  if (!timers_.due(Timer::stats, now)) return;
  status(stopping, true);
  const double seconds = std::chrono::duration<double>(settings_.stats_interval).count();
  const auto& totals = parts_.decisions.totals();
  const auto& book = parts_.book;
  const auto delta = totals.dispatched - last_stats_.dispatched;
  if (delta > 0 || book.in_flight() > 0 || book.buffered() > 0) {
    spdlog::info("dispatched {} ({:.0f}/s), in flight {}, buffered {}, retried {}, parked {}", delta,
                 static_cast<double>(delta) / seconds, book.in_flight(), book.buffered(),
                 totals.retried - last_stats_.retried, totals.parked - last_stats_.parked);
  }
  last_stats_ = totals;
  schedule_stats(now);
}

// stats_interval_ms 0 turns the stats line off (and its status refresh).
void Reporting::schedule_stats(core::SteadyTime now) {
  const auto interval = settings_.stats_interval;
  if (interval.count() > 0) timers_.set(Timer::stats, now + interval);
  else timers_.clear(Timer::stats);
}

}  // namespace outboxd::daemon
