// Signals: stop on SIGTERM and SIGINT, reload on SIGHUP.
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
  for (const int signal : ports_.events.take_signals()) {
    if (signal == SIGHUP) {
      if (stopping_) spdlog::info("SIGHUP while stopping: not reloading");
      else reload();
      continue;
    }
    if (!stopping_) {
      spdlog::info("{}: stopping; waiting up to {} ms for {} in-flight deliveries", strsignal(signal),
                   config_.dispatch.shutdown_timeout.count(), book_.in_flight());
      begin_stop();
    } else {
      spdlog::warn("{} again: stopping now", strsignal(signal));
      timers_.set(dispatch::Timer::stop, ports_.clock.now());
    }
  }
}

void RunLoop::begin_stop() {
  stopping_ = true;
  reporting_.stopping();
  timers_.set(dispatch::Timer::stop, ports_.clock.now() + config_.dispatch.shutdown_timeout);
}

void RunLoop::request_stop() {
  if (!stopping_) begin_stop();
}

// The file is read and checked in full before anything changes: an invalid
// file is reported as check-config reports it and the running configuration
// stays. Before start-up is announced, READY=1 must wait for the connections.
void RunLoop::reload() {
  reporting_.reloading();
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
  reporting_.reloaded();
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
    book_.set_policy(planner_policy(config_.dispatch, config_.destinations));
    decisions_.set_settings(DecisionWriter::settings_of(config_));
    claims_.set_settings(ClaimStep::settings_of(config_));
    backlog_.set_settings(BacklogStep::settings_of(config_));
    reporting_.set_settings(Reporting::settings_of(config_));
    const auto now = ports_.clock.now();
    timers_.set_earlier(dispatch::Timer::poll, now + config_.dispatch.poll_interval);
    timers_.set_earlier(dispatch::Timer::purge, now + config_.retention.purge_interval);
    spdlog::info("reload: applied {}", fmt::join(plan.applied, ", "));
  }
  if (!plan.needs_restart.empty()) {
    spdlog::warn("reload: changed but kept as running until a restart: {}", fmt::join(plan.needs_restart, ", "));
  }
}

}  // namespace outboxd::daemon
