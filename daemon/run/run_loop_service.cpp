// Signals and the service manager: stop on SIGTERM, reload on SIGHUP, readiness and STATUS= lines.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <cstring>

#include "config/loader.hpp"
#include "daemon/config_loading.hpp"
#include "daemon/run/run_loop.hpp"

namespace outboxd::daemon {

void RunLoop::handle_signals() {
  for (const int signal : events_.take_signals()) {
    if (signal == SIGHUP) {
      if (stopping_) spdlog::info("SIGHUP while stopping: not reloading");
      else reload();
      continue;
    }
    if (!stopping_) {
      spdlog::info("{}: stopping; waiting up to {} ms for {} in-flight deliveries", strsignal(signal),
                   config_.dispatch.shutdown_timeout.count(), book_.in_flight());
      stopping_ = true;
      health_.stopping = true;
      service_.stopping();
      report_status(false);  // the loop may end in this very iteration
      timers_.set(dispatch::Timer::stop, clock_.now() + config_.dispatch.shutdown_timeout);
    } else {
      spdlog::warn("{} again: stopping now", strsignal(signal));
      timers_.set(dispatch::Timer::stop, clock_.now());
    }
  }
}

// The file is read and checked in full before anything changes: an invalid
// file is reported as check-config reports it and the running configuration
// stays. Before start-up is announced, READY=1 must wait for the connections.
void RunLoop::reload() {
  if (announced_ready_) service_.reloading();
  spdlog::info("SIGHUP: reloading {}", config_.source);
  auto loaded = config::load_file(config_.source);
  if (loaded) {
    apply_reload(config::plan_reload(config_, loaded.value()));
  } else {
    const auto count = loaded.diagnostics().size();
    for (const auto& diagnostic : loaded.diagnostics()) spdlog::error("{}", diagnostic.to_string());
    spdlog::error("reload: {} has {} error{}; the running configuration stays", config_.source, count,
                  count == 1 ? "" : "s");
  }
  if (announced_ready_) service_.ready();
}

// Everything the loop reads afresh needs nothing more; the planner, the logger
// and the timers are told. Only key names are logged: a key may hold a secret.
void RunLoop::apply_reload(config::ReloadPlan plan) {
  const bool log_changed = std::any_of(plan.applied.begin(), plan.applied.end(),
                                       [](const std::string& key) { return key.starts_with("log."); });
  config_ = std::move(plan.config);
  if (log_changed) init_logging(config_);
  if (plan.applied.empty() && plan.needs_restart.empty()) spdlog::info("reload: no changes");
  if (!plan.applied.empty()) {
    book_.set_policy(planner_policy(config_.dispatch));
    decisions_.set_settings(DecisionWriter::settings_of(config_));
    claims_.set_settings(ClaimStep::settings_of(config_));
    const auto now = clock_.now();
    timers_.set_earlier(dispatch::Timer::poll, now + config_.dispatch.poll_interval);
    timers_.set_earlier(dispatch::Timer::purge, now + config_.retention.purge_interval);
    schedule_stats(now);
    schedule_backlog(now);
    spdlog::info("reload: applied {}", fmt::join(plan.applied, ", "));
  }
  if (!plan.needs_restart.empty()) {
    spdlog::warn("reload: changed but kept as running until a restart: {}", fmt::join(plan.needs_restart, ", "));
  }
}

// Ready for the service manager once rows can flow: the database and the
// broker are both connected (once; reconnects later are no news to it).
void RunLoop::announce_ready() {
  if (announced_ready_ || !db_.up() || !broker_up_) return;
  service_.ready();
  announced_ready_ = true;
}

void RunLoop::report_status(bool refresh) {
  if (stopping_) return service_.status("stopping", fmt::format("{} in flight", book_.in_flight()), refresh);
  if (!db_.up()) return service_.status("connecting to the database", "", refresh);
  if (!broker_up_) return service_.status("waiting for the broker", "", refresh);
  if (!leases_.may_publish()) return service_.status("waiting for partition leases", "", refresh);
  if (claims_.standby().stalled()) {
    return service_.status("rows waiting for the standby",
                           fmt::format("{} claimed rows wait for database.wait_for_standby", claims_.standby().waiting_rows()),
                           refresh);
  }
  service_.status("dispatching", fmt::format("{} in flight, {} dispatched", book_.in_flight(), decisions_.totals().dispatched),
                  refresh);
}

}  // namespace outboxd::daemon
