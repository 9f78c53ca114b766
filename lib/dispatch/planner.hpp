// The dispatch planner: which claimed rows to publish now, and what to write back after each outcome.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/clock.hpp"
#include "core/outbox_message.hpp"
#include "dispatch/backoff.hpp"
#include "dispatch/destination_policy.hpp"
#include "dispatch/session_queue.hpp"

namespace outboxd::dispatch {

// A claimed row as the planner holds it, payload included, from the claim
// until its outcome is persisted. Its session, persisted attempts and
// partition are the message's.
struct HeldRow {
  core::OutboxMessage message;
  core::SteadyTime due_since{};  // when it became due, on our clock
};

// The memory a held row's payload takes: body and headers (the other columns are small and bounded).
std::size_t payload_bytes(const core::OutboxMessage& message);

struct PlannerPolicy {
  std::size_t window = 1000;             // rows in flight at once, all sessions together (at least 1)
  std::size_t per_session_in_flight = 1; // 1: strict order (at least 1)
  std::size_t max_buffered = 10000;      // known rows, in flight included; bounds claim_room()
  // Payload bytes in flight: a row goes out only while they stay within it,
  // or when nothing else is in flight (a row larger than the budget goes
  // out alone). The row book claims only while the bytes held, buffered and
  // in flight, are below it.
  std::size_t in_flight_bytes = std::numeric_limits<std::size_t>::max();
  int max_attempts = 10;                 // the attempt that reaches this count parks the row
  BackoffPolicy backoff{std::chrono::seconds(1), std::chrono::minutes(5), 2.0, 0.2};
  core::Duration release_retry = std::chrono::seconds(1);
  int releases_per_attempt = 5;          // every N-th consecutive release/unknown counts as an attempt; <= 0: never
  DestinationPolicies destinations;      // priority and limits by destination name
};

// Which limit last held a destination's rows back.
enum class Limit { none, rate, in_flight };

// A destination as the planner sees it, for status and metrics.
struct DestinationState {
  std::string name;
  DestinationPolicy policy;
  std::size_t buffered = 0;   // rows waiting to go out
  std::size_t in_flight = 0;
  Limit held_by = Limit::none;  // rows are waiting for this limit now
};

// A failed attempt, to write back: attempts, last_error and next_attempt_at =
// now + retry_in; or, when `park` is set, status = 'parked' (retry_in is 0).
struct FailureWrite {
  core::RowId id = 0;
  int attempts = 0;
  core::Duration retry_in{};
  std::string error;
  bool park = false;
};

// Decisions the caller must persist. A row appears at most once across both
// lists, so they can be applied in any order: a later decision about a row
// replaces an earlier one not yet persisted (a second failure replaces the
// first; an acceptance removes a failure).
struct PendingWrites {
  std::vector<core::RowId> dispatched;
  std::vector<FailureWrite> failures;
  bool empty() const { return dispatched.empty() && failures.empty(); }
};

// Pure and single-threaded: rows and outcomes in, a plan out. The owner calls
// take_ready() after add() and after outcomes, persists pending_writes() and
// then calls on_persisted(), and sleeps no longer than next_retry().
//
// Order rules (docs/design.md, "Order, retries and parking"). A session is
// its session id as one writer wrote it, core::session_key().
//  - A session's rows go out in id order, at most per_session_in_flight at a
//    time; with 1 (strict) the next row waits until the previous is accepted.
//  - Late commits: a lower id arriving while a higher id of its session is
//    still buffered goes first; arriving after the higher one was handed out
//    (in flight, accepted, or back waiting for a retry) it is queued behind
//    it: a row once published is retried before any row never published.
//  - Rows without a session are bounded by the window only.
//  - take_ready() serves sessions oldest head id first, so no session starves.
//
// Destination rules (DestinationPolicy, set by the operator):
//  - A higher priority class goes out first; within a class, destinations
//    share the window fairly (take_turn()).
//  - A destination's rows wait while it has max_in_flight rows in flight or
//    its rate limit has no token; the rest of the window goes to others. A
//    row held back keeps its place: it is the next of its destination to go.
//  - A limited destination holding limited_buffer() rows or more waiting is
//    held_back(): the claim reads no more of its rows until they go out.
//    Those rows do not count against claim_room(), so others are claimed on.
class Planner {
 public:
  struct Counters {
    std::uint64_t published = 0;  // rows handed out by take_ready()
    std::uint64_t accepted = 0;
    std::uint64_t rejected = 0;
    std::uint64_t unsendable = 0;  // outcomes, and rows the claim found unsendable (parked unsent)
    std::uint64_t released = 0;
    std::uint64_t unknown = 0;
    std::uint64_t connection_lost = 0;
    std::uint64_t not_sent = 0;
    std::uint64_t parked = 0;
    std::uint64_t stale = 0;  // outcomes for ids not in flight: ignored
  };

  Planner(PlannerPolicy policy, const core::Clock& clock, core::RandomSource& random);

  // A new policy (a configuration reload) for every decision from now on.
  // Rows already in flight stay so, also above a smaller window or per-session
  // limit: new rows wait until the counts fall below the new limits. Retry
  // times already set are kept; later failures use the new backoff.
  void set_policy(PlannerPolicy policy);

  // Ignores ids it already knows (buffered, in flight, or with a write not
  // yet persisted: accepted, failed, parked) and rows of a session whose park
  // is not yet persisted.
  // Accepts more rows than claim_room() if given them. Returns how many were added.
  std::size_t add(std::vector<HeldRow> claimed);

  // max_buffered minus known rows (buffered, in flight, accepted not yet persisted); never negative.
  std::size_t claim_room() const { return room_beyond(0); }
  // The same with `extra` rows more allowed.
  std::size_t room_beyond(std::size_t extra) const;
  // in_flight_bytes minus the payloads held (buffered and in flight); never negative.
  std::size_t byte_room() const;

  // Rows to publish now, in id order per session; they become in flight.
  // Respects the window, the in-flight bytes and the per-session limit,
  // skips rows waiting for a retry time. O(k log n) for k rows handed out.
  std::vector<core::RowId> take_ready();

  // Ignores ids not in flight (stale), counting them in Counters::stale.
  void on_outcome(core::RowId id, core::DeliveryOutcome outcome, std::string_view reason);

  const PendingWrites& pending_writes() const { return pending_; }
  void on_persisted();  // every pending write was persisted: forget them

  // Earliest retry time of a waiting row that could be published then (rows
  // stuck behind another row of their session are left out). May lie in the
  // past: call take_ready(). Empty when no row waits for a time.
  std::optional<core::SteadyTime> next_retry() const;

  // A lease was lost: forget the partition's rows that are not in flight.
  // Its in-flight rows are forgotten once their outcome arrives, unless accepted.
  void drop_partition(int partition);

  // True for rows buffered, in flight, or settled but not yet persisted:
  // the rows the claim need not return again.
  bool knows(core::RowId id) const;
  // The row as held: buffered or in flight, with its payload; or settled
  // (accepted, parked, dropped with a failure to write) and not yet
  // persisted, without body and headers. Null for a row not known.
  const HeldRow* find(core::RowId id) const;
  // Calls f(const HeldRow&) for every row find() finds, in no order.
  template <class F>
  void for_each_known(F f) const;

  std::vector<core::RowId> in_flight_ids() const;  // ascending; read by tests
  std::size_t in_flight() const { return in_flight_; }
  std::size_t in_flight_bytes() const { return in_flight_bytes_; }
  std::size_t held_bytes() const { return held_bytes_; }  // payloads of the rows buffered and in flight
  std::size_t buffered() const { return rows_.size() - in_flight_; }  // waiting to be published
  Counters counters() const { return counters_; }

  // Rows a limited destination holds waiting before the claim leaves it out:
  // an eighth of max_buffered.
  std::size_t limited_buffer() const;
  // The limited destinations the claim must leave out now, by name.
  std::vector<std::string> held_back() const;
  bool any_held_back() const;
  // The destinations the policy names, in name order.
  std::vector<DestinationState> configured_destinations() const;

 private:
  struct Session;
  struct Destination;

  struct Row {
    HeldRow held;
    std::size_t bytes = 0;        // payload_bytes(held.message)
    Session* session = nullptr;   // null: no session
    core::SteadyTime retry_at{};  // not published before this time
    int attempts = 0;             // persisted attempts, plus failures recorded since
    int releases = 0;             // consecutive released/unknown outcomes
    std::uint32_t generation = 0; // session generation when handed out
    std::uint64_t turn = 0;       // its destination's turn: see take_turn()
    Destination* destination = nullptr;
    bool in_flight = false;
    bool timer_armed = false;     // timers_ holds {retry_at, id}
    bool orphaned = false;        // in flight when its partition was dropped
  };

  struct Session {
    const std::string* key = nullptr;   // its session key, the node's own in sessions_
    SessionQueue queue;                 // buffered rows, in publication order
    std::size_t in_flight = 0;
    std::uint32_t generation = 0;       // bumped by each park: older in-flight rows are orphans
    bool in_ready_heap = false;
    bool parked = false;                // a park is not persisted yet: refuse its rows
  };

  // A session whose head can go out, keyed by that head's id; or (session
  // null) a row without session. Entries may be stale and are checked on pop.
  // They go out by priority class, then in turn order, then id order.
  struct ReadyEntry {
    int priority;
    std::uint64_t turn;
    core::RowId key;
    Session* session;
    bool operator>(const ReadyEntry& other) const {
      if (priority != other.priority) return priority < other.priority;
      return turn != other.turn ? turn > other.turn : key > other.key;
    }
  };
  using ReadyHeap = std::priority_queue<ReadyEntry, std::vector<ReadyEntry>, std::greater<>>;

  struct Destination {
    const std::string* name = nullptr;  // the node's own key in destinations_
    DestinationPolicy policy;
    std::optional<TokenBucket> bucket;  // with a rate limit
    std::uint64_t last_turn = 0;        // its latest row's turn
    std::size_t rows = 0;               // known rows: buffered and in flight
    std::size_t in_flight = 0;
    ReadyHeap held;                     // entries its limits hold back, in the order they go out
    Limit held_by = Limit::none;
    bool configured() const { return policy != DestinationPolicy{}; }
  };

  struct TimerEntry {
    core::SteadyTime at;
    core::RowId id;
    bool operator>(const TimerEntry& other) const { return at != other.at ? at > other.at : id > other.id; }
  };

  using RowMap = std::unordered_map<core::RowId, Row>;

  Destination& destination_of(const std::string& name);
  void apply_policy(Destination& destination, core::SteadyTime now);
  void apply_destination_policies();
  std::uint64_t take_turn(Destination& destination);
  bool admit(Destination& destination, const ReadyEntry& entry, core::SteadyTime now);
  bool release_held(core::SteadyTime now);
  void reorder_ready();
  std::size_t limited_waiting() const;
  void push_ready(core::RowId id, Session* session);
  void promote_due(core::SteadyTime now);
  bool take_loose(const ReadyEntry& entry, core::SteadyTime now, std::vector<core::RowId>& out);
  bool take_from_session(const ReadyEntry& entry, core::SteadyTime now, std::vector<core::RowId>& out);
  bool fits(const Row& row) const;
  bool park_if_unsendable(RowMap::iterator it);
  bool take_entry(const ReadyEntry& entry, core::SteadyTime now, std::vector<core::RowId>& out);
  void hand_out(core::RowId id, Row& row, core::SteadyTime now, std::vector<core::RowId>& out);
  void schedule(Session& session, core::SteadyTime now);
  void arm(core::RowId id, Row& row);
  void requeue(RowMap::iterator it, core::SteadyTime retry_at, core::SteadyTime now);
  void settle(RowMap::iterator it, core::DeliveryOutcome outcome, std::string_view reason, core::SteadyTime now);
  void on_not_settled(RowMap::iterator it, core::DeliveryOutcome outcome, std::string_view reason,
                      core::SteadyTime now);
  void record_failure(RowMap::iterator it, std::string error, core::SteadyTime now);
  void push_failure(FailureWrite write);
  void drop_failure(core::RowId id);
  void park(RowMap::iterator it, int attempts, std::string error);
  void reread(RowMap::iterator it);
  void forget_queue(Session& session);
  void erase_if_idle(Session& session);
  RowMap::iterator forget(RowMap::iterator it);
  bool publishable_head(const Session& session, core::RowId id) const;
  bool orphaned(const Row& row) const;
  void prune_timers();

  PlannerPolicy policy_;
  const core::Clock& clock_;
  core::RandomSource& random_;
  Backoff backoff_;

  RowMap rows_;                                         // buffered and in flight: the one owner of payloads
  std::unordered_map<core::RowId, HeldRow> retired_;    // forgotten with a write not yet persisted: no payload
  std::unordered_map<std::string, Session> sessions_;   // by session key: sessions with rows, in flight or parked
  std::unordered_set<core::RowId> settled_;             // ids with a write not yet persisted
  std::unordered_map<core::RowId, std::size_t> failure_at_;  // index in pending_.failures
  std::vector<Session*> parked_sessions_;               // parks not yet persisted
  ReadyHeap ready_;
  std::uint64_t turn_now_ = 0;                                 // the turn of the last row handed out
  std::unordered_map<std::string, Destination> destinations_;  // with rows known, or a policy of their own
  std::size_t destinations_left_ = 0;                          // destinations_'s size after it was last pruned
  std::vector<Destination*> limited_;                          // those with a limit, kept while configured
  std::vector<Destination*> holding_;                          // those with entries held back
  std::priority_queue<TimerEntry, std::vector<TimerEntry>, std::greater<>> timers_;
  std::size_t in_flight_ = 0;
  std::size_t in_flight_bytes_ = 0;
  std::size_t held_bytes_ = 0;
  PendingWrites pending_;
  Counters counters_;
};

template <class F>
void Planner::for_each_known(F f) const {
  for (const auto& [id, row] : rows_) f(row.held);
  for (const auto& [id, held] : retired_) f(held);
}

}  // namespace outboxd::dispatch
