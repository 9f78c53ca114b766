// The run loop: start, one iteration as a fixed list of steps, finish; and the claim and publish steps.
#include "daemon/run/run_loop.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/commands.hpp"
#include "dispatch/wake_rules.hpp"

namespace outboxd::daemon {

namespace {

using dispatch::Timer;
using std::chrono::milliseconds;

}  // namespace

dispatch::PlannerPolicy planner_policy(const config::DispatchConfig& d) {
  dispatch::PlannerPolicy policy;
  policy.window = static_cast<std::size_t>(d.in_flight);
  policy.per_session_in_flight = static_cast<std::size_t>(d.per_session_in_flight);
  policy.max_buffered = static_cast<std::size_t>(d.in_flight + 2 * d.batch_size);
  policy.in_flight_bytes = static_cast<std::size_t>(d.in_flight_bytes);
  policy.max_attempts = d.max_attempts;
  policy.backoff = {d.backoff_initial, d.backoff_max, d.backoff_multiplier, d.backoff_jitter};
  policy.release_retry = d.release_retry;
  policy.releases_per_attempt = d.releases_per_attempt;
  return policy;
}

RunLoop::RunLoop(config::Config config, std::string instance_id, Ports ports)
    : config_(std::move(config)),
      instance_id_(std::move(instance_id)),
      metrics_(registry_),
      backlog_(registry_),
      db_(ports.database),
      broker_(ports.broker),
      events_(ports.events),
      clock_(ports.clock),
      random_(ports.random),
      book_(planner_policy(config_.dispatch), clock_, random_),
      leases_(config_.leases, instance_id_, clock_),
      service_(clock_),
      decisions_(DecisionWriter::settings_of(config_), instance_id_, book_, db_, metrics_, timers_, clock_),
      claims_(ClaimStep::settings_of(config_), config_.dispatch, instance_id_, book_, db_, leases_, metrics_, timers_,
              clock_, [this](const core::Error& error) { fail_database(error); }) {}

int RunLoop::run() {
  if (auto failed = start()) return *failed;
  while (iterate()) {
  }
  return finish();
}

std::optional<int> RunLoop::start() {
  spdlog::info("outboxd {} starting as instance {}", OUTBOXD_VERSION, instance_id_);
  metrics::beat(health_, clock_.now());
  if (!config_.http.listen.empty()) {
    // The loop may sleep a whole poll interval when idle: only a longer silence is a stall.
    const auto stale_after = std::chrono::ceil<std::chrono::seconds>(config_.dispatch.poll_interval) +
                             std::chrono::seconds(30);
    http_ = std::make_unique<metrics::HttpServer>(registry_, health_, stale_after);
    if (auto listening = http_->start(config_.http.listen); !listening) {
      spdlog::critical("{}", listening.error().message);
      return 1;
    }
    spdlog::info("serving /metrics, /healthz and /readyz on {}", config_.http.listen);
  }
  if (auto started = broker_.start(); !started) {
    spdlog::critical("cannot start the AMQP client: {}", started.error().message);
    return 1;
  }
  if (broker_.plain_over_cleartext()) {
    spdlog::warn("broker: SASL PLAIN sends the password in clear text over amqp:// to a non-loopback host; "
                 "use amqps:// (or set broker.allow_insecure_plain to silence this)");
  }
  const auto now = clock_.now();
  timers_.set(Timer::poll, now + config_.dispatch.poll_interval);
  timers_.set(Timer::purge, now);
  timers_.set(Timer::backlog, now);  // the first measurement comes at once
  schedule_stats(now);
  schedule_backlog(now);
  report_status(false);
  return std::nullopt;
}

bool RunLoop::iterate() {
  if (exit_code_) return false;
  handle_signals();
  apply_outcomes();
  if (auto kept = keep_database(); !kept) {
    stop_for(kept.error());
    return false;
  }
  publish_ready();  // a session's next row goes out before the database round trips
  persist_decisions();
  keep_leases();
  claim_rows();
  publish_ready();
  purge_finished();
  measure_backlog();
  log_stats();
  if (stopping_ && finished_stopping()) return false;
  announce_ready();
  report_status(false);
  service_.keep_alive();
  update_health();
  sleep_until_next_event();
  return !exit_code_;
}

int RunLoop::finish() {
  persist_decisions();
  if (db_.up()) {
    if (auto handed = leases_.hand_back_all(db_.leases()); !handed) {
      spdlog::warn("could not hand back leases: {}", handed.error().message);
    }
    [[maybe_unused]] auto gone = db_.leases().deregister(instance_id_);
  }
  broker_.stop();
  if (http_) http_->stop();
  if (book_.in_flight() > 0) {
    spdlog::warn("stopped with {} deliveries unconfirmed; they will be published again", book_.in_flight());
  }
  spdlog::info("outboxd stopped: dispatched {}, parked {}", decisions_.totals().dispatched,
               decisions_.totals().parked);
  return exit_code_.value_or(0);
}

core::Status RunLoop::keep_database() {
  if (auto connected = db_.ensure_connected(); !connected) return connected;
  if (db_.just_connected()) {
    book_.restart_pass();
    claims_.on_reconnect();
    leases_.force_renewal();
  }
  return {};
}

void RunLoop::fail_database(const core::Error& error) {
  if (error.kind == core::ErrorKind::fatal || error.kind == core::ErrorKind::forbidden) stop_for(error);
  metrics_.database_lost.inc();
  db_.lost(error);
}

// Ends the run on an error that retrying cannot fix. A missing privilege exits
// as a configuration error, which systemd does not restart: a restarted daemon
// would publish the rows it could not mark again, and again. So does a login
// the server refuses: restarting cannot change the credentials or the database name.
void RunLoop::stop_for(const core::Error& error) {
  if (error.kind == core::ErrorKind::forbidden) {
    spdlog::critical("database: {}; {}", error.message, db_.privilege_fix());
    exit_code_ = kExitConfig;
  } else if (db_.login_refused()) {
    spdlog::critical("database: {}", error.message);
    exit_code_ = kExitConfig;
  } else {
    spdlog::critical("database: {}", error.message);
    exit_code_ = kExitFailure;
  }
}

void RunLoop::claim_rows() { claims_.claim(stopping_); }

void RunLoop::publish_ready() {
  // Exiting: rows published now could not be marked.
  if (stopping_ || exit_code_ || !broker_up_ || !leases_.may_publish()) return;
  const auto unsendable = book_.counters().unsendable;
  auto rows = book_.take_ready();
  // Rows the claim found unsendable were parked instead of handed out.
  if (const auto parked = book_.counters().unsendable - unsendable; parked > 0) {
    metrics_.unsendable.inc(parked);
    decisions_.expect_decisions();
  }
  if (rows.empty()) return;
  const auto now = clock_.now();
  for (const auto& row : rows) observe_delay(metrics_.delay_to_publish, book_, row.id, now);
  metrics_.published.inc(rows.size());
  broker_.send(std::move(rows), leases_.valid_until());
}

bool RunLoop::finished_stopping() const {
  return (book_.in_flight() == 0 && book_.pending_writes().empty()) || timers_.due(Timer::stop, clock_.now());
}

}  // namespace outboxd::daemon