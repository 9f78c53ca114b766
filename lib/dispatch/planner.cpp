// The dispatch planner's hand-out side: per-session order, the window, retry timers, row bookkeeping.
#include "dispatch/planner.hpp"

#include <algorithm>
#include <utility>

namespace outboxd::dispatch {

namespace {

// Destinations remembered with their latest turn before those behind the
// turn going out are forgotten.
constexpr std::size_t kTurnsKept = 1024;

// Limits below 1 would stop all progress; the config layer rejects them, and
// the planner bends them to the nearest value that still works.
PlannerPolicy normalized(PlannerPolicy policy) {
  policy.window = std::max<std::size_t>(policy.window, 1);
  policy.per_session_in_flight = std::max<std::size_t>(policy.per_session_in_flight, 1);
  policy.max_attempts = std::max(policy.max_attempts, 1);
  policy.release_retry = std::max(policy.release_retry, core::Duration::zero());
  return policy;
}

}  // namespace

void Planner::set_policy(PlannerPolicy policy) {
  policy_ = normalized(std::move(policy));
  backoff_ = Backoff(policy_.backoff);
  apply_destination_policies();
}

std::size_t payload_bytes(const core::OutboxMessage& message) {
  return message.body.size() + message.headers_json.size();
}

Planner::Planner(PlannerPolicy policy, const core::Clock& clock, core::RandomSource& random)
    : policy_(normalized(std::move(policy))), clock_(clock), random_(random), backoff_(policy_.backoff) {
  rows_.reserve(policy_.max_buffered);
  for (const auto& entry : policy_.destinations) destination_of(entry.first);
}


std::size_t Planner::add(std::vector<HeldRow> claimed) {
  const core::SteadyTime now = clock_.now();
  std::size_t added = 0;
  for (HeldRow& held : claimed) {
    const core::RowId id = held.message.id;
    if (knows(id)) continue;
    Session* session = nullptr;
    if (auto key = core::session_key(held.message)) {
      auto [it, inserted] = sessions_.try_emplace(std::move(*key));
      if (inserted) {
        it->second.key = &it->first;
      } else if (it->second.parked) {
        continue;
      }
      session = &it->second;
    }
    const int attempts = held.message.attempts;
    const std::size_t bytes = payload_bytes(held.message);
    Destination& destination = destination_of(held.message.destination);
    ++destination.rows;
    // Filled in place: a Row built aside would move the message twice.
    Row& row = rows_.try_emplace(id).first->second;
    row.held = std::move(held);
    row.bytes = bytes;
    row.session = session;
    row.attempts = attempts;
    row.turn = take_turn(destination);
    row.destination = &destination;
    held_bytes_ += bytes;
    ++added;
    if (session != nullptr) {
      session->queue.push_fresh(id);
      schedule(*session, now);
    } else {
      push_ready(id, nullptr);
    }
  }
  prune_timers();
  return added;
}

// Fair share between destinations (start-time fair queueing): each row
// takes its destination's next turn, no earlier than the turn going out now,
// and rows go out in turn order. A destination with a backlog held has taken
// turns far ahead; a row of another destination takes the next turn and goes
// out before that backlog's later rows, while rows of one destination keep
// their order. Only rows of different sessions change places: a session's
// rows go out in its queue's order whatever their turns.
std::uint64_t Planner::take_turn(Destination& destination) {
  destination.last_turn = std::max(destination.last_turn, turn_now_) + 1;
  return destination.last_turn;
}

// Destinations without rows and without a policy of their own weigh nothing:
// they are forgotten now and then, so that the map holds the destinations
// with rows. The next look comes once the map has doubled again: with more
// than kTurnsKept destinations holding rows, a look per row would scan them all.
Planner::Destination& Planner::destination_of(const std::string& name) {
  if (destinations_.size() > std::max(kTurnsKept, 2 * destinations_left_)) {
    std::erase_if(destinations_, [](const auto& entry) {
      const Destination& d = entry.second;
      return d.rows == 0 && d.held.empty() && !d.configured();
    });
    destinations_left_ = destinations_.size();
  }
  auto [it, inserted] = destinations_.try_emplace(name);
  if (inserted) {
    it->second.name = &it->first;
    apply_policy(it->second, clock_.now());
  }
  return it->second;
}

void Planner::push_ready(core::RowId id, Session* session) {
  const Row& row = rows_.at(id);
  ready_.push({row.destination->policy.priority, row.turn, id, session});
}

std::size_t Planner::room_beyond(std::size_t extra) const {
  const std::size_t known = rows_.size() + pending_.dispatched.size() - limited_waiting();
  const std::size_t allowed = policy_.max_buffered + extra;
  return known >= allowed ? 0 : allowed - known;
}

std::size_t Planner::byte_room() const {
  return held_bytes_ >= policy_.in_flight_bytes ? 0 : policy_.in_flight_bytes - held_bytes_;
}

std::vector<core::RowId> Planner::take_ready() {
  const core::SteadyTime now = clock_.now();
  promote_due(now);
  std::vector<core::RowId> out;
  bool room = true;
  release_held(now);
  while (room && in_flight_ < policy_.window) {
    // Entries released whose rows could not go after all (gone, or their
    // session moved on) leave room under the limit: release more.
    if (ready_.empty() && !release_held(now)) break;
    if (ready_.empty()) continue;
    const ReadyEntry entry = ready_.top();
    ready_.pop();
    room = take_entry(entry, now, out);
  }
  prune_timers();
  return out;
}

bool Planner::take_entry(const ReadyEntry& entry, core::SteadyTime now, std::vector<core::RowId>& out) {
  return entry.session == nullptr ? take_loose(entry, now, out) : take_from_session(entry, now, out);
}

void Planner::on_persisted() {
  pending_.dispatched.clear();
  pending_.failures.clear();
  failure_at_.clear();
  settled_.clear();
  retired_.clear();
  const core::SteadyTime now = clock_.now();
  for (Session* session : parked_sessions_) {
    session->parked = false;
    schedule(*session, now);
    erase_if_idle(*session);
  }
  parked_sessions_.clear();
  prune_timers();
}

std::optional<core::SteadyTime> Planner::next_retry() const {
  std::optional<core::SteadyTime> next;
  if (!timers_.empty()) next = timers_.top().at;
  for (const Destination* destination : holding_) {
    if (destination->held_by != Limit::rate) continue;
    const core::SteadyTime token = destination->bucket->next_token();
    if (!next || token < *next) next = token;
  }
  return next;
}

void Planner::drop_partition(int partition) {
  // Rare (a lease was lost), so a scan of the known rows is fine here.
  std::vector<Session*> touched;
  for (auto it = rows_.begin(); it != rows_.end();) {
    Row& row = it->second;
    if (row.held.message.partition != partition) {
      ++it;
    } else if (row.in_flight) {
      row.orphaned = true;
      ++it;
    } else {
      if (row.session != nullptr) touched.push_back(row.session);
      it = forget(it);
    }
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  const core::SteadyTime now = clock_.now();
  for (Session* session : touched) {
    session->queue.remove_if([this](core::RowId id) { return !rows_.contains(id); });
    schedule(*session, now);
    erase_if_idle(*session);
  }
  prune_timers();
}

std::vector<core::RowId> Planner::in_flight_ids() const {
  std::vector<core::RowId> ids;
  ids.reserve(in_flight_);
  for (const auto& [id, row] : rows_) {
    if (row.in_flight) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Rows whose retry time has come: a row without session becomes ready; a
// session gets another look (its head may now go out).
void Planner::promote_due(core::SteadyTime now) {
  while (!timers_.empty() && timers_.top().at <= now) {
    const TimerEntry entry = timers_.top();
    timers_.pop();
    const auto it = rows_.find(entry.id);
    if (it == rows_.end() || it->second.in_flight || it->second.retry_at != entry.at) continue;
    Row& row = it->second;
    row.timer_armed = false;
    if (row.session == nullptr) {
      push_ready(entry.id, nullptr);
    } else {
      schedule(*row.session, now);
    }
  }
}

// Each take_ returns false when the row's bytes do not fit in flight now:
// its entry goes back on the heap, and nothing else goes out before it.
bool Planner::take_loose(const ReadyEntry& entry, core::SteadyTime now, std::vector<core::RowId>& out) {
  const core::RowId id = entry.key;
  const auto it = rows_.find(id);
  // A stale entry: the row went out already, was forgotten, or is waiting.
  if (it == rows_.end() || it->second.in_flight || it->second.session != nullptr || it->second.retry_at > now) {
    return true;
  }
  if (park_if_unsendable(it)) return true;
  if (!fits(it->second)) {
    ready_.push(entry);
    return false;
  }
  if (!admit(*it->second.destination, entry, now)) return true;
  hand_out(id, it->second, now, out);
  return true;
}

bool Planner::take_from_session(const ReadyEntry& entry, core::SteadyTime now, std::vector<core::RowId>& out) {
  Session& session = *entry.session;
  const core::RowId key = entry.key;
  if (!session.parked && !session.queue.empty() && session.queue.front() == key &&
      session.in_flight < policy_.per_session_in_flight) {
    const auto it = rows_.find(key);
    Row& row = it->second;
    if (row.retry_at <= now) {
      const bool sendable = !row.held.message.unsendable;
      if (sendable && !fits(row)) {
        ready_.push(entry);  // still in the heap
        return false;
      }
      // Held back by its destination's limit: the session stays queued there.
      if (sendable && !admit(*row.destination, entry, now)) return true;
      session.queue.pop_front();
      if (!park_if_unsendable(it)) {
        ++session.in_flight;
        row.generation = session.generation;
        hand_out(key, row, now, out);
      }
    }
  }
  session.in_ready_heap = false;
  // Queue the session again under its current head (which may differ from
  // the key it was queued under), or arm the head's timer.
  schedule(session, now);
  erase_if_idle(session);
  return true;
}

bool Planner::fits(const Row& row) const {
  return in_flight_ == 0 || in_flight_bytes_ + row.bytes <= policy_.in_flight_bytes;
}

// A row the claim found unsendable (too large) is parked, with its session,
// when its turn comes: never published, never retried, and the rows of its
// session before it went out first.
bool Planner::park_if_unsendable(RowMap::iterator it) {
  auto& reason = it->second.held.message.unsendable;
  if (!reason) return false;
  ++counters_.unsendable;
  park(it, it->second.attempts + 1, std::move(*reason));
  return true;
}

void Planner::hand_out(core::RowId id, Row& row, core::SteadyTime now, std::vector<core::RowId>& out) {
  row.in_flight = true;
  row.timer_armed = false;
  turn_now_ = std::max(turn_now_, row.turn);
  Destination& destination = *row.destination;
  ++destination.in_flight;
  if (destination.bucket) destination.bucket->take(now);
  ++in_flight_;
  in_flight_bytes_ += row.bytes;
  ++counters_.published;
  out.push_back(id);
}

// Called whenever a session's head, in-flight count or park changes: puts it
// in the ready heap if its head can go out now, or arms the head's timer.
void Planner::schedule(Session& session, core::SteadyTime now) {
  if (session.parked || session.queue.empty() || session.in_flight >= policy_.per_session_in_flight) return;
  const core::RowId head = session.queue.front();
  Row& row = rows_.at(head);
  if (row.retry_at > now) {
    arm(head, row);
  } else if (!session.in_ready_heap) {
    push_ready(head, &session);
    session.in_ready_heap = true;
  }
}

void Planner::arm(core::RowId id, Row& row) {
  if (row.timer_armed) return;
  timers_.push({row.retry_at, id});
  row.timer_armed = true;
}

void Planner::requeue(RowMap::iterator it, core::SteadyTime retry_at, core::SteadyTime now) {
  Row& row = it->second;
  row.retry_at = retry_at;
  row.timer_armed = false;
  if (row.session != nullptr) {
    row.session->queue.push_returned(it->first);
    schedule(*row.session, now);
  } else if (retry_at <= now) {
    push_ready(it->first, nullptr);
  } else {
    arm(it->first, row);
  }
}

// A row with a write not yet persisted stays findable, without its payload:
// the caller reads its message id, timeout and partition until the write is
// persisted, and the claim must not return it meanwhile.
Planner::RowMap::iterator Planner::forget(RowMap::iterator it) {
  if (settled_.contains(it->first)) {
    HeldRow& held = it->second.held;
    held.message.body.clear();
    held.message.headers_json = std::string();
    retired_.insert_or_assign(it->first, std::move(held));
  }
  held_bytes_ -= it->second.bytes;
  --it->second.destination->rows;
  return rows_.erase(it);
}

bool Planner::knows(core::RowId id) const { return rows_.contains(id) || settled_.contains(id); }

const HeldRow* Planner::find(core::RowId id) const {
  if (const auto row = rows_.find(id); row != rows_.end()) return &row->second.held;
  const auto retired = retired_.find(id);
  return retired == retired_.end() ? nullptr : &retired->second;
}

void Planner::erase_if_idle(Session& session) {
  if (session.parked || session.in_ready_heap || session.in_flight > 0 || !session.queue.empty()) return;
  // Through an iterator: the key we hold is the node's own, destroyed by the erase.
  if (const auto it = sessions_.find(*session.key); it != sessions_.end()) sessions_.erase(it);
}

bool Planner::publishable_head(const Session& session, core::RowId id) const {
  return !session.parked && session.in_flight < policy_.per_session_in_flight && session.queue.front() == id;
}

// Keeps the top of timers_ meaningful for next_retry(): drops entries of
// rows that are gone, in flight or rescheduled, and of rows that could not go
// out at their time anyway (not their session's head, or the session is full
// or parked). schedule() re-arms those when their session moves.
void Planner::prune_timers() {
  while (!timers_.empty()) {
    const TimerEntry& top = timers_.top();
    const auto it = rows_.find(top.id);
    if (it != rows_.end() && !it->second.in_flight && it->second.retry_at == top.at) {
      Row& row = it->second;
      if (row.session == nullptr || publishable_head(*row.session, top.id)) return;
      row.timer_armed = false;
    }
    timers_.pop();
  }
}

}  // namespace outboxd::dispatch
