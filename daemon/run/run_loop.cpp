// The run loop: its parts wired, start, one turn as a fixed list of steps, finish; a lost or fatal database.
#include "daemon/run/run_loop.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/commands.hpp"
#include "dispatch/wake_rules.hpp"

namespace outboxd::daemon {

using dispatch::Timer;

dispatch::PlannerPolicy planner_policy(const config::DispatchConfig& d,
                                       const std::vector<config::DestinationEntry>& destinations) {
  dispatch::PlannerPolicy policy;
  policy.window = static_cast<std::size_t>(d.in_flight);
  policy.per_session_in_flight = static_cast<std::size_t>(d.per_session_in_flight);
  policy.max_buffered = static_cast<std::size_t>(d.in_flight + 2 * d.batch_size);
  policy.in_flight_bytes = static_cast<std::size_t>(d.in_flight_bytes);
  policy.max_attempts = d.max_attempts;
  policy.backoff = {d.backoff_initial, d.backoff_max, d.backoff_multiplier, d.backoff_jitter};
  policy.release_retry = d.release_retry;
  policy.releases_per_attempt = d.releases_per_attempt;
  for (const auto& entry : destinations) {
    policy.destinations[entry.name] = {entry.priority, entry.max_rate, entry.burst,
                                       static_cast<std::size_t>(entry.max_in_flight)};
  }
  return policy;
}

namespace {

Reporting::Settings reporting_settings(const config::Config& config, RunLoop::Role role) {
  auto settings = Reporting::settings_of(config);
  if (role == RunLoop::Role::tenant) {
    settings.listen.clear();
    settings.service_manager = false;
  }
  return settings;
}

}  // namespace

RunLoop::RunLoop(config::Config config, std::string instance_id, Ports ports, Role role)
    : config_(std::move(config)),
      instance_id_(std::move(instance_id)),
      role_(role),
      metrics_(registry_),
      ports_(ports),
      book_(planner_policy(config_.dispatch, config_.destinations), ports_.clock, ports_.random),
      leases_(config_.leases, instance_id_, ports_.clock),
      decisions_(DecisionWriter::settings_of(config_), instance_id_, book_, ports_.database, metrics_, timers_,
                 ports_.clock),
      claims_(ClaimStep::settings_of(config_), config_.dispatch, instance_id_, book_, ports_.database, leases_,
              metrics_, timers_, ports_.clock, [this](const core::Error& error) { fail_database(error); }),
      publisher_(ports_.broker, book_, leases_, decisions_, metrics_, ports_.clock),
      backlog_(BacklogStep::settings_of(config_), registry_, ports_.database, leases_, timers_, ports_.clock,
               [this](const core::Error& error) { fail_database(error); }),
      reporting_(reporting_settings(config_, role_), registry_,
                 {book_, ports_.database, leases_, publisher_, claims_, decisions_}, metrics_, timers_,
                 ports_.clock) {}

int RunLoop::run() {
  if (auto failed = start()) return *failed;
  while (iterate()) {
  }
  return finish();
}

std::optional<int> RunLoop::start() {
  if (role_ == Role::alone) spdlog::info("outboxd {} starting as instance {}", OUTBOXD_VERSION, instance_id_);
  else spdlog::debug("serving as instance {}", instance_id_);
  if (!reporting_.start() || !publisher_.start()) return 1;
  const auto now = ports_.clock.now();
  timers_.set(Timer::poll, now + config_.dispatch.poll_interval);
  timers_.set(Timer::purge, now);
  return std::nullopt;
}

bool RunLoop::iterate(bool return_if_quiescent) {
  if (exit_code_) return false;
  handle_signals();
  decisions_.apply(publisher_.take_outcomes());
  if (auto kept = keep_database(); !kept) {
    stop_for(kept.error());
    return false;
  }
  publisher_.publish_ready(stopping_ || exit_code_);  // a session's next row goes out before the round trips
  persist_decisions();
  keep_leases();
  claims_.claim(stopping_);
  publisher_.publish_ready(stopping_ || exit_code_);
  purge_finished();
  backlog_.measure(stopping_);
  reporting_.log_stats(stopping_);
  if (stopping_ && finished_stopping()) return false;
  reporting_.report(stopping_);
  if (return_if_quiescent && quiescent()) return true;
  sleep_until_next_event();
  return !exit_code_;
}

int RunLoop::finish() {
  persist_decisions();
  auto& db = ports_.database;
  if (db.up()) {
    if (auto handed = leases_.hand_back_all(db.leases()); !handed) {
      spdlog::warn("could not hand back leases: {}", handed.error().message);
    }
    [[maybe_unused]] auto gone = db.leases().deregister(instance_id_);
  }
  publisher_.stop();
  reporting_.stop();
  if (book_.in_flight() > 0) {
    spdlog::warn("stopped with {} deliveries unconfirmed; they will be published again", book_.in_flight());
  }
  if (role_ == Role::alone) {
    spdlog::info("outboxd stopped: dispatched {}, parked {}", decisions_.totals().dispatched,
                 decisions_.totals().parked);
  }
  return exit_code_.value_or(0);
}

core::Status RunLoop::keep_database() {
  if (auto connected = ports_.database.ensure_connected(); !connected) return connected;
  if (ports_.database.just_connected()) {
    book_.restart_pass();
    claims_.on_reconnect();
    leases_.force_renewal();
  }
  return {};
}

void RunLoop::fail_database(const core::Error& error) {
  if (error.kind == core::ErrorKind::fatal || error.kind == core::ErrorKind::forbidden) stop_for(error);
  metrics_.database_lost.inc();
  ports_.database.lost(error);
}

// Ends the run on an error that retrying cannot fix. A missing privilege exits
// as a configuration error, which systemd does not restart: a restarted daemon
// would publish the rows it could not mark again, and again. So does a login
// the server refuses: restarting cannot change the credentials or the database name.
// One outbox of many ends its loop alone: the daemon goes on, and the
// supervisor tries the outbox again later.
void RunLoop::stop_for(const core::Error& error) {
  const auto level = role_ == Role::alone ? spdlog::level::critical : spdlog::level::err;
  if (error.kind == core::ErrorKind::forbidden) {
    spdlog::log(level, "database: {}; {}", error.message, ports_.database.privilege_fix());
    exit_code_ = kExitConfig;
  } else if (ports_.database.login_refused()) {
    spdlog::log(level, "database: {}", error.message);
    exit_code_ = kExitConfig;
  } else {
    spdlog::log(level, "database: {}", error.message);
    exit_code_ = kExitFailure;
  }
}

void RunLoop::claim_again() { book_.expect_rows(); }

bool RunLoop::quiescent() const {
  return !stopping_ && !exit_code_ && ports_.database.up() && book_.in_flight() == 0 && book_.buffered() == 0 &&
         book_.pending_writes().empty() && !book_.claim_may_find_rows() && claims_.settled();
}

bool RunLoop::finished_stopping() const {
  return (book_.in_flight() == 0 && book_.pending_writes().empty()) || timers_.due(Timer::stop, ports_.clock.now());
}

}  // namespace outboxd::daemon