// Outcomes in, decisions out: broker news applied to the row book, its decisions written to the database.
#include "daemon/run/run_loop.hpp"

#include <spdlog/spdlog.h>

namespace outboxd::daemon {

using std::chrono::milliseconds;

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
  if (!news.outcomes.empty() && !book_.pending_writes().empty()) {
    timers_.set_earlier(dispatch::Timer::mark, clock_.now() + kMarkDelay);
  }
}

void RunLoop::note_broker_connection(const std::vector<BrokerNews::ConnectionEvent>& events) {
  for (const auto& event : events) {
    if (event.up) {
      if (!broker_up_) spdlog::info("broker connected: {}", event.reason);
      broker_down_reason_.clear();
      metrics_.broker_node.replace({{{{"node", event.node}}, 1.0}});
    } else {
      metrics_.broker_node.replace({});
      // Every lost or refused connection counts; the log says it once per outage and
      // reason, so a broker that was never reached (or refuses anew) is named at warn.
      // The node is named apart from the reason: with broker.urls several nodes may
      // refuse for the same reason, and the next attempt goes to the next of them.
      metrics_.broker_lost.inc();
      if (broker_up_) spdlog::warn("broker connection lost ({}): {}", event.node, event.reason);
      else if (event.reason != broker_down_reason_) {
        spdlog::warn("broker unavailable ({}): {}; retrying", event.node, event.reason);
      } else {
        spdlog::debug("broker connection attempt failed ({}): {}", event.node, event.reason);
      }
      broker_down_reason_ = event.reason;
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
  metrics_.connection_lost.inc(after.connection_lost - before.connection_lost);
  const auto not_sent = after.not_sent - before.not_sent;
  if (not_sent == 0) return;
  metrics_.not_sent.inc(not_sent);
  spdlog::warn("{} row{} not sent: the lease fencing deadline passed before the AMQP thread could send {} "
               "(was the process stalled?); they go out again once the lease is confirmed",
               not_sent, not_sent == 1 ? "" : "s", not_sent == 1 ? "it" : "them");
}

// Accepted rows are marked in batches: a batch waits at most kMarkDelay, or
// goes at once when full or when stopping.
bool RunLoop::decisions_due() const {
  const auto& writes = book_.pending_writes();
  if (writes.empty() || !db_.up()) return false;
  const auto pending = writes.dispatched.size() + writes.failures.size();
  return pending >= static_cast<std::size_t>(config_.dispatch.batch_size) || stopping_ ||
         timers_.due(dispatch::Timer::mark, clock_.now());
}

void RunLoop::persist_decisions() {
  if (!decisions_due()) return;
  const auto started = clock_.now();
  const auto written = write_decisions();
  if (!written) return;
  if (written->unchanged > 0) {
    spdlog::warn("{} outcome{} not recorded: lease lost meanwhile (the next owner publishes again) or row no "
                 "longer pending", written->unchanged, written->unchanged == 1 ? "" : "s");
  }
  const auto& writes = book_.pending_writes();
  for (const auto& failure : writes.failures) count_failure(failure);
  // Only what the marks changed: a fenced-off row is the next owner's to dispatch.
  totals_.dispatched += written->marked;
  metrics_.dispatched.inc(written->marked);
  metrics_.mark_seconds.observe(std::chrono::duration<double>(clock_.now() - started).count());
  book_.on_persisted();
  timers_.clear(dispatch::Timer::mark);
}

// The marks, then the failures. Returns how many rows the marks changed and
// how many rows the statements left alone: fenced off (the lease was lost
// meanwhile; the next owner publishes them again) or no longer pending;
// nothing when a statement failed.
std::optional<RunLoop::Written> RunLoop::write_decisions() {
  const auto& writes = book_.pending_writes();
  Written written;
  if (!writes.dispatched.empty()) {
    auto marked = db_.rows().mark_dispatched(writes.dispatched, config_.retention.mode, instance_id_);
    if (!marked) {
      fail_database(marked.error());
      return std::nullopt;
    }
    written.marked = static_cast<std::size_t>(marked.value());
    written.unchanged += writes.dispatched.size() - written.marked;
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
    written.unchanged += records.size() - static_cast<std::size_t>(recorded.value());
  }
  return written;
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
// From the moment a row became due (its claim's start less how long the
// database says it had been due) to `now`.
void RunLoop::observe_delay(metrics::Histogram& histogram, core::RowId id, core::SteadyTime now) {
  if (const auto due_since = book_.due_since(id)) {
    histogram.observe(std::chrono::duration<double>(now - *due_since).count());
  }
}

}  // namespace outboxd::daemon
