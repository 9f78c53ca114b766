// The planner's reaction to broker outcomes: acceptance, retries with backoff, release streaks, parking.
#include "dispatch/planner.hpp"

#include <string>
#include <utility>

namespace outboxd::dispatch {

namespace {

std::string streak_reason(int count, core::DeliveryOutcome outcome, std::string_view reason) {
  std::string text = outcome == core::DeliveryOutcome::released ? "released " : "outcome unknown ";
  text += std::to_string(count);
  text += " times in a row";
  if (!reason.empty()) {
    text += ": ";
    text += reason;
  }
  return text;
}

}  // namespace

void Planner::on_outcome(core::RowId id, core::DeliveryOutcome outcome, std::string_view reason) {
  const auto it = rows_.find(id);
  if (it == rows_.end() || !it->second.in_flight) {
    ++counters_.stale;
    return;
  }
  const core::SteadyTime now = clock_.now();
  Row& row = it->second;
  Session* session = row.session;
  row.in_flight = false;
  --in_flight_;
  in_flight_bytes_ -= row.bytes;
  --row.destination->in_flight;
  if (session != nullptr) --session->in_flight;

  settle(it, outcome, reason, now);
  if (session != nullptr) {
    schedule(*session, now);
    erase_if_idle(*session);
  }
  prune_timers();
}

// What the outcome means for the row, now out of flight.
void Planner::settle(RowMap::iterator it, core::DeliveryOutcome outcome, std::string_view reason,
                     core::SteadyTime now) {
  Row& row = it->second;
  switch (outcome) {
    case core::DeliveryOutcome::accepted:
      ++counters_.accepted;
      pending_.dispatched.push_back(it->first);
      settled_.insert(it->first);
      drop_failure(it->first);
      forget(it);
      break;
    case core::DeliveryOutcome::rejected:
      ++counters_.rejected;
      row.releases = 0;
      record_failure(it, reason.empty() ? std::string("rejected") : std::string(reason), now);
      break;
    case core::DeliveryOutcome::unsendable:
      // The row itself is wrong: another attempt would fail the same way.
      ++counters_.unsendable;
      park(it, row.attempts + 1, reason.empty() ? std::string("unsendable") : std::string(reason));
      break;
    case core::DeliveryOutcome::released:
      ++counters_.released;
      on_not_settled(it, outcome, reason, now);
      break;
    case core::DeliveryOutcome::unknown:
      ++counters_.unknown;
      on_not_settled(it, outcome, reason, now);
      break;
    case core::DeliveryOutcome::connection_lost:
      // Counts for no row: the rows in flight when a connection ends are
      // rarely its cause (ConnectionSuspects, asked by the publisher, finds
      // that one). Nor is it sent again from memory: SQL may have
      // cancelled, skipped or rescheduled it meanwhile, so the claim reads
      // it again.
      ++counters_.connection_lost;
      reread(it);
      break;
    case core::DeliveryOutcome::not_sent:
      // Our own fence stopped it, not the broker: never an attempt.
      ++counters_.not_sent;
      if (orphaned(row)) {
        forget(it);
      } else {
        requeue(it, now + policy_.release_retry, now);
      }
      break;
  }
}

// released / unknown: the broker did not process the row. Not an attempt,
// except every releases_per_attempt-th time in a row.
void Planner::on_not_settled(RowMap::iterator it, core::DeliveryOutcome outcome, std::string_view reason,
                             core::SteadyTime now) {
  Row& row = it->second;
  ++row.releases;
  if (policy_.releases_per_attempt > 0 && row.releases % policy_.releases_per_attempt == 0) {
    record_failure(it, streak_reason(row.releases, outcome, reason), now);
  } else if (orphaned(row)) {
    forget(it);  // not ours any more: the claim returns it to whoever owns it
  } else {
    requeue(it, now + policy_.release_retry, now);
  }
}

void Planner::record_failure(RowMap::iterator it, std::string error, core::SteadyTime now) {
  Row& row = it->second;
  const int attempts = row.attempts + 1;
  if (attempts >= policy_.max_attempts) {
    park(it, attempts, std::move(error));
    return;
  }
  const core::Duration retry_in = backoff_.delay(attempts, random_);
  push_failure({it->first, attempts, retry_in, std::move(error), false});
  row.attempts = attempts;
  if (orphaned(row)) {
    forget(it);  // refused by add() until persisted, so its attempts are not counted from a stale value
  } else {
    requeue(it, now + retry_in, now);
  }
}

// The row is parked, and the rest of its session with it: buffered rows are
// forgotten (the claim will not return them while the park stands), rows of
// the session still in flight become orphans, and add() refuses the session
// until the park is persisted.
void Planner::park(RowMap::iterator it, int attempts, std::string error) {
  const core::RowId id = it->first;
  Session* session = it->second.session;
  push_failure({id, attempts, core::Duration::zero(), std::move(error), true});
  ++counters_.parked;
  forget(it);
  if (session == nullptr) return;
  ++session->generation;
  if (!session->parked) {
    session->parked = true;
    parked_sessions_.push_back(session);
  }
  forget_queue(*session);
}

// The row and its session's buffered rows, which may not overtake it, are
// forgotten: the claim returns them again, as SQL has them then.
void Planner::reread(RowMap::iterator it) {
  Session* session = it->second.session;
  forget(it);
  if (session != nullptr) forget_queue(*session);
}

void Planner::forget_queue(Session& session) {
  session.queue.remove_if([this](core::RowId queued) {
    if (const auto row = rows_.find(queued); row != rows_.end()) forget(row);
    return true;
  });
}

// One write per row: the newest decision replaces an unpersisted older one.
// The id also stays refused by add() until persisted, so a forgotten row is
// never re-added with attempts counted from a stale value.
void Planner::push_failure(FailureWrite write) {
  settled_.insert(write.id);
  const auto [at, inserted] = failure_at_.try_emplace(write.id, pending_.failures.size());
  if (inserted) {
    pending_.failures.push_back(std::move(write));
  } else {
    pending_.failures[at->second] = std::move(write);
  }
}

// The row was accepted after a failure not yet persisted: only the acceptance counts.
void Planner::drop_failure(core::RowId id) {
  if (failure_at_.empty()) return;
  const auto at = failure_at_.find(id);
  if (at == failure_at_.end()) return;
  const std::size_t index = at->second;
  failure_at_.erase(at);
  if (index + 1 != pending_.failures.size()) {
    pending_.failures[index] = std::move(pending_.failures.back());
    failure_at_[pending_.failures[index].id] = index;
  }
  pending_.failures.pop_back();
}

bool Planner::orphaned(const Row& row) const {
  return row.orphaned || (row.session != nullptr && row.session->generation != row.generation);
}

}  // namespace outboxd::dispatch
