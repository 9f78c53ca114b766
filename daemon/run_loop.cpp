// The run loop. Each iteration is a fixed list of steps; see docs/design.md.
#include "daemon/run_loop.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace outboxd::daemon {

namespace {

using std::chrono::milliseconds;

// First look at transactions that were open when NOTIFY was armed; the delay
// doubles up to the poll interval while they stay open.
constexpr milliseconds kLateCommitCheck{10};

// Above notify_max_rate poll; back to NOTIFY below 40% of it, judged over 100 ms windows.
dispatch::WakeupPolicy::Settings wakeup_settings(const config::DispatchConfig& d) {
  const auto rate = static_cast<double>(d.notify_max_rate);
  return {rate, 0.4 * rate, std::chrono::milliseconds(100), d.busy_poll};
}

}  // namespace

dispatch::PlannerPolicy planner_policy(const config::DispatchConfig& d) {
  dispatch::PlannerPolicy policy;
  policy.window = static_cast<std::size_t>(d.in_flight);
  policy.per_session_in_flight = static_cast<std::size_t>(d.per_session_in_flight);
  policy.max_buffered = static_cast<std::size_t>(d.in_flight + 2 * d.batch_size);
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
      db_(ports.database),
      broker_(ports.broker),
      events_(ports.events),
      clock_(ports.clock),
      random_(ports.random),
      book_(planner_policy(config_.dispatch), clock_, random_),
      leases_(config_.leases, instance_id_, clock_),
      service_(clock_),
      late_commits_(kLateCommitCheck, config_.dispatch.poll_interval),
      wakeup_policy_(wakeup_settings(config_.dispatch), clock_.now()) {}

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
  next_poll_ = now + config_.dispatch.poll_interval;
  next_purge_ = now;
  schedule_stats(now);
  report_status(false);
  return std::nullopt;
}

bool RunLoop::iterate() {
  if (exit_code_) return false;
  handle_signals();
  apply_outcomes();
  if (auto kept = keep_database(); !kept) {
    spdlog::critical("database: {}", kept.error().message);
    exit_code_ = 1;
    return false;
  }
  publish_ready();  // a session's next row goes out before the database round trips
  persist_decisions();
  keep_leases();
  claim_rows();
  publish_ready();
  purge_finished();
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
    if (auto released = leases_.release(db_.leases()); !released) {
      spdlog::warn("could not release leases: {}", released.error().message);
    }
    [[maybe_unused]] auto gone = db_.leases().deregister(instance_id_);
  }
  broker_.stop();
  if (http_) http_->stop();
  if (book_.in_flight() > 0) {
    spdlog::warn("stopped with {} deliveries unconfirmed; they will be published again", book_.in_flight());
  }
  spdlog::info("outboxd stopped: dispatched {}, parked {}", totals_.dispatched, totals_.parked);
  return exit_code_.value_or(0);
}

void RunLoop::apply_outcomes() {
  auto news = broker_.take_news();
  note_broker_connection(news.connection_events);
  const auto before = book_.counters();
  const auto now = clock_.now();
  for (const auto& outcome : news.outcomes) {
    if (outcome.outcome == core::DeliveryOutcome::accepted) observe_delay(metrics_.delay_to_accept, outcome.id, now);
    book_.on_outcome(outcome.id, outcome.outcome, outcome.reason);
  }
  count_outcomes(before, book_.counters());
  if (!news.outcomes.empty() && !writes_since_ && !book_.pending_writes().empty()) writes_since_ = clock_.now();
}

void RunLoop::note_broker_connection(const std::vector<BrokerNews::ConnectionEvent>& events) {
  for (const auto& event : events) {
    if (event.up) {
      if (!broker_up_) spdlog::info("broker connected: {}", event.reason);
    } else {
      // Every lost or refused connection counts; the log says it once per outage.
      metrics_.broker_lost.inc();
      if (broker_up_) spdlog::warn("broker connection lost: {}", event.reason);
      else spdlog::debug("broker connection attempt failed: {}", event.reason);
    }
    broker_up_ = event.up;
  }
}

// The planner counts outcomes, once; the metrics take its counts (an outcome
// for a row no longer in flight is stale and not counted).
void RunLoop::count_outcomes(const dispatch::Planner::Counters& before, const dispatch::Planner::Counters& after) {
  metrics_.accepted.inc(after.accepted - before.accepted);
  metrics_.rejected.inc(after.rejected - before.rejected);
  metrics_.unsendable.inc(after.unsendable - before.unsendable);
  metrics_.released.inc(after.released - before.released);
  metrics_.unknown.inc(after.unknown - before.unknown);
  const auto not_sent = after.not_sent - before.not_sent;
  if (not_sent == 0) return;
  metrics_.not_sent.inc(not_sent);
  spdlog::warn("{} row{} not sent: the lease fencing deadline passed before the AMQP thread could send {} "
               "(was the process stalled?); they go out again once the lease is confirmed",
               not_sent, not_sent == 1 ? "" : "s", not_sent == 1 ? "it" : "them");
}

core::Status RunLoop::keep_database() {
  if (auto connected = db_.ensure_connected(); !connected) return connected;
  if (db_.just_connected()) {
    book_.restart_pass();
    notify_armed_ = false;
    late_commits_.clear();
    leases_.force_renewal();
  }
  return {};
}

void RunLoop::fail_database(const core::Error& error) {
  if (error.kind == core::ErrorKind::fatal) {
    spdlog::critical("database: {}", error.message);
    exit_code_ = 1;
  }
  metrics_.database_lost.inc();
  db_.lost(error);
}

// Accepted rows are marked in batches: a batch waits at most kMarkDelay, or
// goes at once when full or when stopping.
bool RunLoop::decisions_due() const {
  const auto& writes = book_.pending_writes();
  if (writes.empty() || !db_.up()) return false;
  const auto pending = writes.dispatched.size() + writes.failures.size();
  return pending >= static_cast<std::size_t>(config_.dispatch.batch_size) || stopping_ ||
         (writes_since_ && clock_.now() - *writes_since_ >= kMarkDelay);
}

void RunLoop::persist_decisions() {
  if (!decisions_due()) return;
  const auto started = clock_.now();
  const auto unchanged = write_decisions();
  if (!unchanged) return;
  if (*unchanged > 0) {
    spdlog::warn("{} outcome{} not recorded: lease lost meanwhile (the next owner publishes again) or row no "
                 "longer pending", *unchanged, *unchanged == 1 ? "" : "s");
  }
  const auto& writes = book_.pending_writes();
  for (const auto& failure : writes.failures) count_failure(failure);
  totals_.dispatched += writes.dispatched.size();
  metrics_.dispatched.inc(writes.dispatched.size());
  metrics_.mark_seconds.observe(std::chrono::duration<double>(clock_.now() - started).count());
  book_.on_persisted();
  writes_since_.reset();
}

// The marks, then the failures. Returns how many rows the statements left
// alone: fenced off (the lease was lost meanwhile; the next owner publishes
// them again) or no longer pending; nothing when a statement failed.
std::optional<std::size_t> RunLoop::write_decisions() {
  const auto& writes = book_.pending_writes();
  std::size_t unchanged = 0;
  if (!writes.dispatched.empty()) {
    auto marked = db_.rows().mark_dispatched(writes.dispatched, config_.retention.mode, instance_id_);
    if (!marked) {
      fail_database(marked.error());
      return std::nullopt;
    }
    unchanged += writes.dispatched.size() - static_cast<std::size_t>(marked.value());
  }
  if (!writes.failures.empty()) {
    std::vector<pg::FailureRecord> records;
    records.reserve(writes.failures.size());
    for (const auto& f : writes.failures) {
      records.push_back({f.id, f.attempts, std::chrono::duration_cast<milliseconds>(f.retry_in), f.error, f.park});
    }
    auto recorded = db_.rows().record_failures(records, instance_id_);
    if (!recorded) {
      fail_database(recorded.error());
      return std::nullopt;
    }
    unchanged += records.size() - static_cast<std::size_t>(recorded.value());
  }
  return unchanged;
}

void RunLoop::count_failure(const dispatch::FailureWrite& failure) {
  if (!failure.park) {
    ++totals_.retried;
    metrics_.retried.inc();
    return;
  }
  const auto* row = book_.find(failure.id);
  spdlog::warn("parked row {} (message_id {}) after {} attempts: {}", failure.id,
               row == nullptr ? std::string("?") : row->message_id, failure.attempts, failure.error);
  ++totals_.parked;
  metrics_.parked.inc();
}

void RunLoop::keep_leases() {
  if (!db_.up() || stopping_) return;
  std::vector<int> stopped;
  std::vector<int> gained;
  if (auto kept = leases_.maintain(db_.leases(), stopped, gained); !kept) return fail_database(kept.error());
  book_.drop_partitions(stopped);
  if (!gained.empty()) book_.restart_pass();  // rows of a new partition may lie below the cursor
  release_drained();
}

// A draining partition is released once none of its rows is held any more.
void RunLoop::release_drained() {
  const auto& draining = leases_.draining();
  if (draining.empty() || !db_.up()) return;
  const auto drained = book_.drained(draining);
  if (auto released = leases_.release_drained(db_.leases(), drained); !released) fail_database(released.error());
}

void RunLoop::claim_rows() {
  if (!claim_possible()) return;
  const auto request = book_.claim_request(static_cast<std::size_t>(config_.dispatch.batch_size));
  const auto started = clock_.now();
  auto sets = db_.rows().claim(leases_.partitions(), static_cast<int>(request.limit), request.after_id,
                               request.known);
  if (!sets) return fail_database(sets.error());
  metrics_.claim_seconds.observe(std::chrono::duration<double>(clock_.now() - started).count());
  const auto claimed = book_.on_claim(std::move(sets).value(), request, started);
  metrics_.claimed.inc(claimed.added);
  wakeup_policy_.on_claim(claimed.rows, clock_.now());
  after_claim(claimed);
}

// How the next claim comes about: at once while batches come back full, else
// at the next due row, a NOTIFY, the poll, or the busy poll while rows pour in.
void RunLoop::after_claim(const dispatch::RowBook::Claimed& claimed) {
  if (claimed.more) {
    // A backlog: we keep claiming without being told, so writers need not NOTIFY.
    if (notify_armed_) arm_notify(false);
    return;
  }
  next_due_.reset();
  if (claimed.next_due) next_due_ = clock_.now() + *claimed.next_due;
  if (wakeup_policy_.busy()) {
    // Rows pour in: writers need not NOTIFY, we look again shortly.
    if (notify_armed_) arm_notify(false);
    next_busy_claim_ = clock_.now() + wakeup_policy_.busy_poll();
  }
}

void RunLoop::publish_ready() {
  if (stopping_ || !broker_up_ || !leases_.may_publish()) return;
  auto rows = book_.take_ready();
  if (rows.empty()) return;
  const auto now = clock_.now();
  for (const auto& row : rows) observe_delay(metrics_.delay_to_publish, row.id, now);
  metrics_.published.inc(rows.size());
  broker_.send(std::move(rows), leases_.valid_until());
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
}

void RunLoop::purge_finished() {
  const auto now = clock_.now();
  if (now < next_purge_ || !db_.up() || stopping_) return;
  next_purge_ = now + config_.retention.purge_interval;
  const auto keep_for = config_.retention.mode == config::RetentionMode::keep ? config_.retention.keep_for
                                                                               : milliseconds(0);
  auto purged = db_.rows().purge(keep_for, config_.retention.purge_batch);
  if (!purged) return fail_database(purged.error());
  if (purged.value() > 0) spdlog::info("retention: purged {} finished rows", purged.value());
  // A full batch means more is waiting: come back soon rather than at the interval.
  if (purged.value() == config_.retention.purge_batch) next_purge_ = now + milliseconds(100);
}

void RunLoop::log_stats() {
  const auto now = clock_.now();
  if (now < next_stats_) return;
  report_status(true);
  const double seconds = std::chrono::duration<double>(config_.dispatch.stats_interval).count();
  const auto delta = totals_.dispatched - last_stats_.dispatched;
  if (delta > 0 || book_.in_flight() > 0 || book_.buffered() > 0) {
    spdlog::info("dispatched {} ({:.0f}/s), in flight {}, buffered {}, retried {}, parked {}", delta,
                 static_cast<double>(delta) / seconds, book_.in_flight(), book_.buffered(),
                 totals_.retried - last_stats_.retried, totals_.parked - last_stats_.parked);
  }
  last_stats_ = totals_;
  schedule_stats(now);
}

// stats_interval_ms 0 turns the stats line off (and its status refresh).
void RunLoop::schedule_stats(core::SteadyTime now) {
  const auto interval = config_.dispatch.stats_interval;
  next_stats_ = interval.count() > 0 ? now + interval : core::SteadyTime::max();
}

// From the moment a row became due (its claim's start less how long the
// database says it had been due) to `now`.
void RunLoop::observe_delay(metrics::Histogram& histogram, core::RowId id, core::SteadyTime now) {
  if (const auto due_since = book_.due_since(id)) {
    histogram.observe(std::chrono::duration<double>(now - *due_since).count());
  }
}

bool RunLoop::finished_stopping() const {
  return (book_.in_flight() == 0 && book_.pending_writes().empty()) || clock_.now() >= stop_deadline_;
}

}  // namespace outboxd::daemon
