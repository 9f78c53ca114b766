// The mark side of the run loop: outcomes applied, decisions written in batches, finished rows purged.
#include "daemon/run/decision_writer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace outboxd::daemon {

using dispatch::Timer;
using std::chrono::milliseconds;

DecisionWriter::Settings DecisionWriter::settings_of(const config::Config& config) {
  return {static_cast<std::size_t>(config.dispatch.batch_size), config.retention};
}

DecisionWriter::DecisionWriter(Settings settings, std::string instance_id, dispatch::RowBook& book, Database& db,
                               RunLoopMetrics& metrics, dispatch::LoopTimers& timers, const core::Clock& clock)
    : settings_(std::move(settings)),
      instance_id_(std::move(instance_id)),
      book_(book),
      db_(db),
      metrics_(metrics),
      timers_(timers),
      clock_(clock) {}

void DecisionWriter::apply(const std::vector<amqp::Outcome>& outcomes) {
  const auto before = book_.counters();
  const auto now = clock_.now();
  for (const auto& outcome : outcomes) {
    if (outcome.outcome == core::DeliveryOutcome::accepted) {
      observe_delay(metrics_.delay_to_accept, book_, outcome.id, now);
    }
    book_.on_outcome(outcome.id, outcome.outcome, outcome.reason);
  }
  count_outcomes(before, book_.counters());
  if (!outcomes.empty() && !book_.pending_writes().empty()) expect_decisions();
}

void DecisionWriter::expect_decisions() { timers_.set_earlier(Timer::mark, clock_.now() + kMarkDelay); }

// The planner counts outcomes, once; the metrics take its counts.
void DecisionWriter::count_outcomes(const dispatch::Planner::Counters& before,
                                    const dispatch::Planner::Counters& after) {
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

bool DecisionWriter::due(bool stopping) const {
  const auto& writes = book_.pending_writes();
  if (writes.empty() || !db_.up()) return false;
  const auto pending = writes.dispatched.size() + writes.failures.size();
  return pending >= settings_.batch || stopping || timers_.due(Timer::mark, clock_.now());
}

core::Status DecisionWriter::persist(bool stopping) {
  if (!due(stopping)) return {};
  const auto started = clock_.now();
  auto result = write();
  if (!result) return result.error();
  const Written& written = result.value();
  if (written.unchanged > 0) {
    spdlog::warn("{} outcome{} not recorded: lease lost meanwhile (the next owner publishes again) or row no "
                 "longer pending", written.unchanged, written.unchanged == 1 ? "" : "s");
  }
  for (const auto& failure : book_.pending_writes().failures) count_failure(failure);
  // Only what the marks changed: a fenced-off row is the next owner's to dispatch.
  totals_.dispatched += written.marked;
  metrics_.dispatched.inc(written.marked);
  metrics_.mark_seconds.observe(std::chrono::duration<double>(clock_.now() - started).count());
  book_.on_persisted();
  timers_.clear(Timer::mark);
  return {};
}

// The marks, then the failures: how many rows the marks changed, and how
// many rows the statements left alone (fenced off, or no longer pending).
core::Result<DecisionWriter::Written> DecisionWriter::write() {
  const auto& writes = book_.pending_writes();
  Written written;
  if (!writes.dispatched.empty()) {
    auto marked = db_.rows().mark_dispatched(writes.dispatched, settings_.retention.mode, instance_id_);
    if (!marked) return marked.error();
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
    if (!recorded) return recorded.error();
    written.unchanged += records.size() - static_cast<std::size_t>(recorded.value());
  }
  return written;
}

void DecisionWriter::count_failure(const dispatch::FailureWrite& failure) {
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

core::Status DecisionWriter::purge() {
  const auto now = clock_.now();
  if (!timers_.due(Timer::purge, now)) return {};
  const auto& retention = settings_.retention;
  timers_.set(Timer::purge, now + retention.purge_interval);
  const auto keep_for = retention.mode == config::RetentionMode::keep ? retention.keep_for : milliseconds(0);
  auto purged = db_.rows().purge(keep_for, retention.purge_batch);
  if (!purged) return purged.error();
  auto failed = db_.rows().purge_failed(retention.failed_keep_for, retention.purge_batch);
  if (!failed) return failed.error();
  const auto& f = failed.value();
  if (purged.value() + f.rows + f.events > 0) {
    spdlog::info("retention: purged {} dispatched rows, {} cancelled rows, {} row events", purged.value(), f.rows,
                 f.events);
  }
  // A full batch means more is waiting: come back soon rather than at the interval.
  if (std::max({purged.value(), f.rows, f.events}) == retention.purge_batch) {
    timers_.set(Timer::purge, now + milliseconds(100));
  }
  return {};
}

}  // namespace outboxd::daemon
