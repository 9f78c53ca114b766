// The run loop. Each iteration is a fixed list of steps; see docs/design.md.
#include "daemon/dispatcher.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/commands.hpp"

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

dispatch::RowRef row_ref(const core::OutboxMessage& row) {
  return {row.id, row.session_id.value_or(std::string()), row.attempts, row.partition};
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

Dispatcher::Dispatcher(config::Config config, std::string instance_id, SignalWatcher& signals)
    : config_(std::move(config)),
      instance_id_(std::move(instance_id)),
      metrics_(registry_),
      random_(static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())),
      signals_(signals),
      outcomes_(wakeup_),
      planner_(planner_policy(config_.dispatch), clock_, random_),
      db_(config_, instance_id_, clock_, random_),
      leases_(config_.leases, instance_id_, clock_),
      publisher_(config_.broker, config_.broker.container_id.empty() ? instance_id_ : config_.broker.container_id,
                 outcomes_),
      service_(clock_),
      late_commits_(kLateCommitCheck, config_.dispatch.poll_interval),
      wakeup_policy_(wakeup_settings(config_.dispatch), clock_.now()) {}

int Dispatcher::run() {
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
  if (auto started = publisher_.start(); !started) {
    spdlog::critical("cannot start the AMQP client: {}", started.error().message);
    return 1;
  }
  if (publisher_.plain_over_cleartext()) {
    spdlog::warn("broker: SASL PLAIN sends the password in clear text over amqp:// to a non-loopback host; "
                 "use amqps:// (or set broker.allow_insecure_plain to silence this)");
  }
  const auto now = clock_.now();
  next_poll_ = now + config_.dispatch.poll_interval;
  next_purge_ = now;
  schedule_stats(now);
  report_status(false);
  while (!exit_code_) {
    handle_signals();
    apply_outcomes();
    if (auto kept = keep_database(); !kept) {
      stop_for(kept.error());
      break;
    }
    publish_ready();  // a session's next row goes out before the database round trips
    persist_decisions();
    keep_leases();
    claim_rows();
    publish_ready();
    purge_finished();
    log_stats();
    if (stopping_ && finished_stopping()) break;
    announce_ready();
    report_status(false);
    service_.keep_alive();
    update_health();
    sleep_until_next_event();
  }
  persist_decisions();
  if (db_.up()) {
    if (auto released = leases_.release(db_.leases()); !released) {
      spdlog::warn("could not release leases: {}", released.error().message);
    }
    [[maybe_unused]] auto gone = db_.leases().deregister(instance_id_);
  }
  publisher_.stop();
  if (http_) http_->stop();
  if (planner_.in_flight() > 0) {
    spdlog::warn("stopped with {} deliveries unconfirmed; they will be published again", planner_.in_flight());
  }
  spdlog::info("outboxd stopped: dispatched {}, parked {}", totals_.dispatched, totals_.parked);
  return exit_code_.value_or(0);
}

void Dispatcher::apply_outcomes() {
  auto batch = outcomes_.take();
  for (const auto& event : batch.connection_events) {
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
  std::size_t not_sent = 0;
  const auto now = clock_.now();
  for (const auto& outcome : batch.outcomes) {
    planner_.on_outcome(outcome.id, outcome.outcome, outcome.reason);
    switch (outcome.outcome) {
      case core::DeliveryOutcome::accepted:
        metrics_.accepted.inc();
        observe_delay(metrics_.delay_to_accept, outcome.id, now);
        break;
      case core::DeliveryOutcome::rejected: metrics_.rejected.inc(); break;
      case core::DeliveryOutcome::unsendable: metrics_.unsendable.inc(); break;
      case core::DeliveryOutcome::released: metrics_.released.inc(); break;
      case core::DeliveryOutcome::unknown: metrics_.unknown.inc(); break;
      case core::DeliveryOutcome::not_sent: ++not_sent; break;
    }
  }
  if (not_sent > 0) {
    metrics_.not_sent.inc(not_sent);
    spdlog::warn("{} row{} not sent: the lease fencing deadline passed before the AMQP thread could send {} "
                 "(was the process stalled?); they go out again once the lease is confirmed",
                 not_sent, not_sent == 1 ? "" : "s", not_sent == 1 ? "it" : "them");
  }
  if (!batch.outcomes.empty() && !writes_since_ && !planner_.pending_writes().empty()) {
    writes_since_ = clock_.now();
  }
}

core::Status Dispatcher::keep_database() {
  if (auto connected = db_.ensure_connected(); !connected) return connected;
  if (db_.just_connected()) {
    backlog_ = true;
    pass_.restart();
    idle_ = false;
    late_commits_.clear();
    leases_.force_renewal();
  }
  return {};
}

void Dispatcher::fail_database(const core::Error& error) {
  if (error.kind == core::ErrorKind::fatal || error.kind == core::ErrorKind::forbidden) stop_for(error);
  metrics_.database_lost.inc();
  db_.lost(error);
}

// Ends the run on an error that retrying cannot fix. A missing privilege exits
// as a configuration error, which systemd does not restart: a restarted daemon
// would publish the rows it could not mark again, and again.
void Dispatcher::stop_for(const core::Error& error) {
  if (error.kind == core::ErrorKind::forbidden) {
    spdlog::critical("database: {}; {}", error.message, db_.privilege_fix());
    exit_code_ = kExitConfig;
  } else {
    spdlog::critical("database: {}", error.message);
    exit_code_ = kExitFailure;
  }
}

void Dispatcher::persist_decisions() {
  const auto& writes = planner_.pending_writes();
  if (writes.empty() || !db_.up()) return;
  const auto pending = writes.dispatched.size() + writes.failures.size();
  const bool due = pending >= static_cast<std::size_t>(config_.dispatch.batch_size) || stopping_ ||
                   (writes_since_ && clock_.now() - *writes_since_ >= kMarkDelay);
  if (!due) return;
  const auto started = clock_.now();
  // Rows left alone by the statements: fenced off (the lease was lost
  // meanwhile; the next owner publishes them again) or no longer pending.
  std::size_t unchanged = 0;
  if (!writes.dispatched.empty()) {
    auto marked = db_.store().mark_dispatched(writes.dispatched, config_.retention.mode, instance_id_);
    if (!marked) return fail_database(marked.error());
    unchanged += writes.dispatched.size() - static_cast<std::size_t>(marked.value());
  }
  if (!writes.failures.empty()) {
    std::vector<pg::FailureRecord> records;
    records.reserve(writes.failures.size());
    for (const auto& f : writes.failures) {
      records.push_back({f.id, f.attempts, std::chrono::duration_cast<milliseconds>(f.retry_in), f.error, f.park});
    }
    auto recorded = db_.store().record_failures(records, instance_id_);
    if (!recorded) return fail_database(recorded.error());
    unchanged += records.size() - static_cast<std::size_t>(recorded.value());
  }
  if (unchanged > 0) {
    spdlog::warn("{} outcome{} not recorded: lease lost meanwhile (the next owner publishes again) or row no "
                 "longer pending", unchanged, unchanged == 1 ? "" : "s");
  }
  for (const auto& f : writes.failures) {
    if (f.park) {
      const auto row = rows_.find(f.id);
      spdlog::warn("parked row {} (message_id {}) after {} attempts: {}", f.id,
                   row == rows_.end() ? std::string("?") : row->second.message.message_id, f.attempts, f.error);
      ++totals_.parked;
      metrics_.parked.inc();
    } else {
      ++totals_.retried;
      metrics_.retried.inc();
    }
  }
  // A timeout now marked may have held back later rows of its session
  // (outbox_sql.cpp, held_back): they can be claimed now. If this pass moved
  // past some, a new pass finds them at once; it reads none of the rows we
  // know, so it costs a walk over their index entries, not the whole backlog
  // that the current pass has yet to cover.
  if (std::any_of(writes.dispatched.begin(), writes.dispatched.end(), [this](core::RowId id) {
        const auto row = rows_.find(id);
        return row != rows_.end() && row->second.message.due_at.has_value();
      })) {
    backlog_ = true;
    if (pass_.passed_over_any()) pass_.restart();
  }
  totals_.dispatched += writes.dispatched.size();
  metrics_.dispatched.inc(writes.dispatched.size());
  metrics_.mark_seconds.observe(std::chrono::duration<double>(clock_.now() - started).count());
  planner_.on_persisted();
  writes_since_.reset();
  forget_rows(planner_.take_forgotten());
}

void Dispatcher::forget_rows(const std::vector<core::RowId>& ids) {
  // A row forgotten earlier may have been claimed and added again since.
  for (const auto id : ids) {
    if (!planner_.knows(id)) rows_.erase(id);
  }
}

void Dispatcher::keep_leases() {
  if (!db_.up() || stopping_) return;
  std::vector<int> stopped;
  std::vector<int> gained;
  if (auto kept = leases_.maintain(db_.leases(), stopped, gained); !kept) return fail_database(kept.error());
  for (const int partition : stopped) planner_.drop_partition(partition);
  if (!stopped.empty()) forget_rows(planner_.take_forgotten());
  if (!gained.empty()) {
    // Rows of a new partition may lie below the cursor of the current pass.
    pass_.restart();
    backlog_ = true;
  }
  release_drained();
}

// A draining partition is released once the planner knows none of its rows:
// every in-flight row has its outcome and that outcome is persisted, so the
// next owner neither publishes them again nor finds its marks fenced off.
void Dispatcher::release_drained() {
  const auto& draining = leases_.draining();
  if (draining.empty() || !db_.up()) return;
  std::vector<int> busy;
  for (const auto& [id, row] : rows_) {
    if (planner_.knows(id) && std::binary_search(draining.begin(), draining.end(), row.message.partition)) {
      busy.push_back(row.message.partition);
    }
  }
  std::sort(busy.begin(), busy.end());
  std::vector<int> drained;
  std::set_difference(draining.begin(), draining.end(), busy.begin(), busy.end(), std::back_inserter(drained));
  if (auto released = leases_.release_drained(db_.leases(), drained); !released) fail_database(released.error());
}

void Dispatcher::claim_rows() {
  if (!claim_possible()) return;
  const auto room = planner_.claim_room();
  const auto batch = static_cast<std::size_t>(config_.dispatch.batch_size);
  const auto started = clock_.now();
  auto claimed = db_.store().claim(leases_.partitions(), static_cast<int>(std::min(room, batch)), pass_.cursor(),
                                   claimable_known_rows());
  if (!claimed) return fail_database(claimed.error());
  metrics_.claim_seconds.observe(std::chrono::duration<double>(clock_.now() - started).count());
  auto& result = claimed.value();
  // A row held back behind a due timeout is passed over by this pass; its
  // session's later rows must wait for the next pass too, or they would
  // overtake it once the timeout is marked.
  for (const auto& [id, session] : result.held_back) pass_.pass_over(id, session);
  std::vector<dispatch::RowRef> refs;
  refs.reserve(result.rows.size());
  for (auto& row : result.rows) {
    if (planner_.knows(row.id) || pass_.waits(row.id, row.session_id)) continue;
    refs.push_back(row_ref(row));
    const auto due_since = started - row.due_for;
    rows_.insert_or_assign(row.id, KnownRow{std::move(row), due_since});
  }
  metrics_.claimed.inc(planner_.add(refs));
  // Rows the planner refused (their session's park is not persisted yet).
  for (const auto& ref : refs) {
    if (!planner_.knows(ref.id)) rows_.erase(ref.id);
  }
  wakeup_policy_.on_claim(result.rows.size(), clock_.now());
  pass_.on_claim(result.immediate_full, result.last_immediate_id);
  if (result.more()) {
    // A backlog: we keep claiming without being told, so writers need not NOTIFY.
    if (idle_) arm_wakeup(false);
    return;
  }
  backlog_ = false;
  next_due_.reset();
  if (result.next_due) next_due_ = clock_.now() + *result.next_due;
  if (wakeup_policy_.busy()) {
    // Rows pour in: writers need not NOTIFY, we look again shortly.
    if (idle_) arm_wakeup(false);
    next_busy_claim_ = clock_.now() + wakeup_policy_.busy_poll();
  }
}

// The rows we know that the claim could return again: immediate rows ahead of
// the pass's cursor, and timeouts (the timeout claim has no cursor). Left out
// by the claim, they cost it nothing and leave its batch to new rows.
std::vector<core::RowId> Dispatcher::claimable_known_rows() const {
  std::vector<core::RowId> ids;
  for (const auto& [id, known] : rows_) {
    if (id > pass_.cursor() || known.message.due_at) ids.push_back(id);
  }
  return ids;
}

void Dispatcher::publish_ready() {
  // Exiting: rows published now could not be marked.
  if (stopping_ || exit_code_ || !broker_up_ || !leases_.may_publish()) return;
  const auto ids = planner_.take_ready();
  if (ids.empty()) return;
  std::vector<core::OutboxMessage> batch;
  batch.reserve(ids.size());
  const auto now = clock_.now();
  for (const auto id : ids) {
    batch.push_back(rows_.at(id).message);
    observe_delay(metrics_.delay_to_publish, id, now);
  }
  metrics_.published.inc(batch.size());
  publisher_.publish(std::move(batch), leases_.valid_until());
}

void Dispatcher::update_health() {
  const auto now = clock_.now();
  metrics::beat(health_, now);
  health_.database_up = db_.up();
  health_.broker_up = broker_up_;
  health_.leases_held = leases_.may_publish();
  metrics_.in_flight.set(static_cast<std::int64_t>(planner_.in_flight()));
  metrics_.buffered.set(static_cast<std::int64_t>(planner_.buffered()));
  metrics_.partitions.set(static_cast<std::int64_t>(leases_.partitions().size()));
}

void Dispatcher::purge_finished() {
  const auto now = clock_.now();
  if (now < next_purge_ || !db_.up() || stopping_) return;
  next_purge_ = now + config_.retention.purge_interval;
  const auto keep_for = config_.retention.mode == config::RetentionMode::keep ? config_.retention.keep_for
                                                                               : milliseconds(0);
  auto purged = db_.store().purge(keep_for, config_.retention.purge_batch);
  if (!purged) return fail_database(purged.error());
  if (purged.value() > 0) spdlog::info("retention: purged {} finished rows", purged.value());
  // A full batch means more is waiting: come back soon rather than at the interval.
  if (purged.value() == config_.retention.purge_batch) next_purge_ = now + milliseconds(100);
}

void Dispatcher::log_stats() {
  const auto now = clock_.now();
  if (now < next_stats_) return;
  report_status(true);
  const double seconds = std::chrono::duration<double>(config_.dispatch.stats_interval).count();
  const auto delta = totals_.dispatched - last_stats_.dispatched;
  if (delta > 0 || planner_.in_flight() > 0 || planner_.buffered() > 0) {
    spdlog::info("dispatched {} ({:.0f}/s), in flight {}, buffered {}, retried {}, parked {}", delta,
                 static_cast<double>(delta) / seconds, planner_.in_flight(), planner_.buffered(),
                 totals_.retried - last_stats_.retried, totals_.parked - last_stats_.parked);
  }
  last_stats_ = totals_;
  schedule_stats(now);
}

// stats_interval_ms 0 turns the stats line off (and its status refresh).
void Dispatcher::schedule_stats(core::SteadyTime now) {
  const auto interval = config_.dispatch.stats_interval;
  next_stats_ = interval.count() > 0 ? now + interval : core::SteadyTime::max();
}

// From the moment a row became due (its claim's start less how long the
// database says it had been due) to `now`.
void Dispatcher::observe_delay(metrics::Histogram& histogram, core::RowId id, core::SteadyTime now) {
  if (const auto row = rows_.find(id); row != rows_.end()) {
    histogram.observe(std::chrono::duration<double>(now - row->second.due_since).count());
  }
}

bool Dispatcher::finished_stopping() const {
  return (planner_.in_flight() == 0 && planner_.pending_writes().empty()) || clock_.now() >= stop_deadline_;
}

}  // namespace outboxd::daemon
