// The rows this instance holds, from claim to mark: their payloads, the claim pass over the outbox, the planner.
#pragma once

#include <chrono>
#include <cstddef>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "core/claimed_sets.hpp"
#include "core/clock.hpp"
#include "core/outbox_message.hpp"
#include "dispatch/claim_pass.hpp"
#include "dispatch/statistics_watch.hpp"
#include "dispatch/planner.hpp"

namespace outboxd::dispatch {

// Pure and single-threaded, like the planner it owns: the run loop hands it
// what the database returned and what the broker said, and asks it what to
// claim, publish and persist. The planner it owns holds each row, payload
// included, from the claim until the row is forgotten (its outcome
// persisted, its partition or session dropped); the book looks rows up there.
//
// Whether a claim may find rows: after a claim came back short, not until
// something says so (a NOTIFY, the poll, a due timer, a late commit, a
// timeout marked, new partitions, a new connection: expect_rows()).
class RowBook {
 public:
  RowBook(PlannerPolicy policy, const core::Clock& clock, core::RandomSource& random);

  // While the pass reads a backlog and the rows held leave no room for its
  // next claim, a small claim by destination alone (an eighth of a batch,
  // beyond max_buffered) runs this often, so that a row of another
  // destination is not held up until the backlog's rows went out: writers
  // do not NOTIFY while a pass reads a backlog.
  static constexpr std::chrono::milliseconds kLanesInterval{25};

  void set_policy(PlannerPolicy policy) { planner_.set_policy(std::move(policy)); }
  std::vector<DestinationState> configured_destinations() const { return planner_.configured_destinations(); }

  // --- claiming
  struct ClaimRequest {
    std::size_t limit = 0;
    core::RowId after_id = 0;          // the pass's cursor
    std::vector<core::RowId> known;    // every row held: the claim leaves them out and tells late commits from them
    std::size_t statement_bytes = 0;   // the byte budget of each statement
    core::LaneRequest lanes;           // while the pass reads a backlog: a share of `limit` by destination
    std::optional<std::string> horizon;  // ClaimPass::horizon()
    bool beside_pass = false;          // by destination alone, leaving the pass where it is (kLanesInterval)
  };
  // Also once no destination is held back any more, after a claim left some out.
  bool claim_may_find_rows() const {
    return claim_may_find_rows_ || (left_out_held_ && !planner_.any_held_back());
  }
  void expect_rows() { claim_may_find_rows_ = true; }
  // From the lowest id again, and claim: new partitions (their rows may lie
  // below the cursor) or a new connection.
  void restart_pass();
  std::uint64_t pass_restarts() const { return pass_.restarts(); }
  // Room for at least half a batch, a smaller claim not being worth its
  // round trip, and the payloads held below the in-flight bytes; or a claim
  // by destination beside the pass is due (kLanesInterval).
  bool room_for_claim(std::size_t batch_size) const;
  // When the next claim by destination beside the pass is due; empty when none will be.
  std::optional<core::SteadyTime> next_lanes_claim(std::size_t batch_size) const;
  // At most `claim_bytes` of payload, and no more than the in-flight bytes
  // leave room for; each of the claim's two statements reads half of that,
  // and at least one row. While the pass reads a backlog, an eighth of the
  // rows goes to the claim by destination, so that a row of any other
  // destination is claimed by the next claim after its commit. While a
  // limited destination holds enough rows (Planner::held_back()), the claim
  // by destination alone reads every other destination.
  ClaimRequest claim_request(std::size_t batch_size,
                             std::size_t claim_bytes = std::numeric_limits<std::size_t>::max()) const;

  struct Claimed {
    std::size_t rows = 0;    // rows returned (merged, those behind a timeout left out), before the pass's rules
    std::size_t added = 0;   // rows handed to the planner
    bool more = false;       // a batch was full: claim again without being told
    bool backlog_began = false;  // the first full claim of a pass: a backlog to read
    std::optional<std::chrono::milliseconds> next_due;  // when the claim came back short
    bool statistics_stale = false;  // StatisticsWatch: have the planner's statistics refreshed
  };
  // The claim that `request` asked for, sent at `started`, returned `sets`.
  Claimed on_claim(core::ClaimedSets sets, const ClaimRequest& request, core::SteadyTime started);

  // --- publishing and outcomes
  std::vector<core::OutboxMessage> take_ready();
  // A lost connection's rows are forgotten, to be read again (Planner): they
  // may lie below the cursor, so a new pass starts, and at once.
  void on_outcome(core::RowId id, core::DeliveryOutcome outcome, std::string_view reason) {
    planner_.on_outcome(id, outcome, reason);
    if (outcome == core::DeliveryOutcome::connection_lost) restart_pass();
  }
  // When the row became due on our clock (its claim's start less how long the
  // database said it had been due); empty for a row not held.
  std::optional<core::SteadyTime> due_since(core::RowId id) const;
  const core::OutboxMessage* find(core::RowId id) const;

  // --- persisting
  const PendingWrites& pending_writes() const { return planner_.pending_writes(); }
  // Every pending write was persisted. A timeout now marked may have had
  // later rows of its session behind it: a claim finds them now.
  void on_persisted();

  // --- leases
  void drop_partitions(const std::vector<int>& partitions);
  // The draining partitions none of whose rows is held any more: every
  // in-flight row has its outcome and that outcome is persisted, so the next
  // owner neither publishes them again nor finds its marks fenced off.
  std::vector<int> drained(const std::vector<int>& draining) const;

  std::size_t in_flight() const { return planner_.in_flight(); }
  std::size_t held_bytes() const { return planner_.held_bytes(); }
  std::size_t buffered() const { return planner_.buffered(); }
  std::optional<core::SteadyTime> next_retry() const { return planner_.next_retry(); }
  Planner::Counters counters() const { return planner_.counters(); }

 private:
  bool room_for_pass(std::size_t batch_size) const;
  std::size_t lanes_room(std::size_t batch_size) const;

  const core::Clock& clock_;
  Planner planner_;  // the rows held, payloads included
  ClaimPass pass_;
  StatisticsWatch statistics_;
  bool claim_may_find_rows_ = true;
  std::string held_lanes_after_;  // where the next claim by destination alone goes on (claim_request())
  bool left_out_held_ = false;    // the last claim left held-back destinations out: they have rows unread
  core::SteadyTime next_lanes_{};  // no claim by destination beside the pass before this
};

}  // namespace outboxd::dispatch
