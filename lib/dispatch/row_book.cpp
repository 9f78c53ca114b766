// The rows held from claim to mark: the claim pass's rules around the planner that holds the rows.
#include "dispatch/row_book.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

#include "dispatch/claim_merge.hpp"

namespace outboxd::dispatch {

namespace {

// The claim by destination's share of a claim's rows (1 in kLaneShare) while
// the pass reads a backlog: enough for the first rows of the destinations
// besides it, little taken from the backlog's own rate.
constexpr std::size_t kLaneShare = 8;

}  // namespace

RowBook::RowBook(PlannerPolicy policy, const core::Clock& clock, core::RandomSource& random)
    : clock_(clock), planner_(std::move(policy), clock, random) {}

void RowBook::restart_pass() {
  pass_.restart();
  claim_may_find_rows_ = true;
}

// The rows held: the claim leaves them out (they cost it nothing and leave
// its batch to new rows), and tells them from rows committed late below the
// pass's cursor.
RowBook::ClaimRequest RowBook::claim_request(std::size_t batch_size, std::size_t claim_bytes) const {
  const std::size_t bytes = std::min(claim_bytes, planner_.byte_room());
  ClaimRequest request{std::min(planner_.claim_room(), batch_size), pass_.cursor(), {},
                       std::max<std::size_t>(bytes / 2, 1), {}, {}};
  const bool by_destination = pass_.in_backlog() && request.limit >= 2;
  if (!room_for_pass(batch_size)) {
    // room_for_claim() let it through: a claim by destination beside the pass.
    request.beside_pass = true;
    request.limit = lanes_room(batch_size);
    request.lanes.only = true;
    request.lanes.alone = true;
    request.lanes.limit = request.limit;
    request.lanes.per_lane = std::max<std::size_t>(1, request.limit / 2);
    request.lanes.after = pass_.lanes_after();
    request.lanes.skip = pass_.backlog_destinations();
    auto held_back = planner_.held_back();
    request.lanes.skip.insert(request.lanes.skip.end(), held_back.begin(), held_back.end());
  } else if (auto held_back = planner_.held_back(); !held_back.empty()) {
    // The id-order claim would read the held destinations' rows, which would
    // wait here and fill the room: the claim by destination reads all the
    // others instead, until those rows go out. Each of its rows costs a look
    // at its session's earlier rows (outbox_sql.cpp, claim_lanes).
    request.lanes.only = true;
    request.lanes.limit = request.limit;
    request.lanes.per_lane = request.limit;
    request.lanes.after = held_lanes_after_;
    request.lanes.skip = std::move(held_back);
  } else if (by_destination) {
    request.lanes.limit = std::max<std::size_t>(1, request.limit / kLaneShare);
    request.limit -= request.lanes.limit;
    request.lanes.per_lane = std::max<std::size_t>(1, request.lanes.limit / 2);
    request.lanes.after = pass_.lanes_after();
    request.lanes.skip = pass_.backlog_destinations();
  }
  request.horizon = pass_.horizon();
  // Every row held, below the cursor too: past the start of a pass the
  // immediate claim leaves out a row whose session has an earlier pending row
  // that is not held (a late commit below the cursor), and the claim by
  // destination one whose session has an earlier unclaimed row elsewhere.
  // Beside the pass, only rows of the destinations it reads: those are what it leaves out.
  const auto& skip = request.lanes.skip;
  planner_.for_each_known([&](const HeldRow& held) {
    if (request.beside_pass && std::find(skip.begin(), skip.end(), held.message.destination) != skip.end()) return;
    request.known.push_back(held.message.id);
  });
  return request;
}

bool RowBook::room_for_pass(std::size_t batch_size) const {
  return planner_.claim_room() > batch_size / 2 && planner_.byte_room() > 0;
}

std::size_t RowBook::lanes_room(std::size_t batch_size) const {
  const std::size_t share = std::max<std::size_t>(1, batch_size / kLaneShare);
  return std::min(share, planner_.room_beyond(share));
}

bool RowBook::room_for_claim(std::size_t batch_size) const {
  if (room_for_pass(batch_size)) return true;
  const auto next = next_lanes_claim(batch_size);
  return next && *next <= clock_.now();
}

std::optional<core::SteadyTime> RowBook::next_lanes_claim(std::size_t batch_size) const {
  if (!pass_.in_backlog() || room_for_pass(batch_size) || lanes_room(batch_size) == 0 || planner_.byte_room() == 0) {
    return std::nullopt;
  }
  return next_lanes_;
}

RowBook::Claimed RowBook::on_claim(core::ClaimedSets sets, const ClaimRequest& request, core::SteadyTime started) {
  Claimed claimed;
  std::string seen = std::move(sets.horizon);
  const bool late_commits_asked = sets.late_commits_asked;
  const auto table_rows = sets.table_rows;
  auto claim = merge_claim(std::move(sets), request.limit, request.lanes.limit);
  claimed.rows = claim.rows.size();
  // A row behind a due timeout or a late commit is passed over by this pass;
  // its session's later rows must wait for the next pass too, or they would
  // overtake it once the timeout is marked or the late row claimed.
  for (const auto& over : claim.passed_over) pass_.pass_over(over.id, over.order);
  std::vector<HeldRow> rows;
  rows.reserve(claim.rows.size());
  for (auto& row : claim.rows) {
    if (planner_.knows(row.id) || pass_.waits(row)) continue;
    const auto due_since = started - row.due_for;
    rows.push_back({std::move(row), due_since});
  }
  claimed.added = planner_.add(std::move(rows));
  if (request.beside_pass) {
    // The pass, its cursor and whether rows may be found stay as they were;
    // `more` says the pass goes on, as it does.
    next_lanes_ = started + kLanesInterval;
    claimed.more = true;
    pass_.on_lanes(pass_.backlog_destinations(), std::move(claim.lanes_after));
    return claimed;
  }
  claimed.backlog_began = claim.immediate_full && !pass_.in_backlog();
  pass_.count_read(claim.rows.size());
  claimed.statistics_stale = claim.immediate_full && statistics_.stale(pass_.read(), table_rows, started);
  pass_.on_claim(claim.immediate_full, claim.last_immediate_id, std::move(seen), late_commits_asked);
  claimed.more = claim.more();
  left_out_held_ = request.lanes.only;
  if (request.lanes.only) {
    // The walk reads destinations in name order from held_lanes_after_ to
    // the last: one that came back short from past the first looks again
    // from the first.
    claimed.more = claimed.more || !request.lanes.after.empty();
    held_lanes_after_ = claim.lanes_after.value_or("");
  } else if (claim.immediate_full) {
    pass_.on_lanes(std::move(claim.backlog_destinations), std::move(claim.lanes_after));
  }
  // A claim may also run because held-back destinations have room again (claim_may_find_rows()).
  claim_may_find_rows_ = claimed.more;
  if (!claimed.more) claimed.next_due = claim.next_due;
  return claimed;
}

std::vector<core::OutboxMessage> RowBook::take_ready() {
  const auto ids = planner_.take_ready();
  std::vector<core::OutboxMessage> ready;
  ready.reserve(ids.size());
  for (const auto id : ids) ready.push_back(planner_.find(id)->message);
  return ready;
}

std::optional<core::SteadyTime> RowBook::due_since(core::RowId id) const {
  const auto* held = planner_.find(id);
  if (held == nullptr) return std::nullopt;
  return held->due_since;
}

const core::OutboxMessage* RowBook::find(core::RowId id) const {
  const auto* held = planner_.find(id);
  return held == nullptr ? nullptr : &held->message;
}

// If this pass moved past rows behind a timeout now marked, a new
// pass finds them at once; it reads none of the rows held, so it costs a walk
// over their index entries, not the whole backlog the current pass has yet to cover.
void RowBook::on_persisted() {
  const auto& dispatched = planner_.pending_writes().dispatched;
  if (std::any_of(dispatched.begin(), dispatched.end(), [this](core::RowId id) {
        const auto* row = find(id);
        return row != nullptr && row->due_at.has_value();
      })) {
    claim_may_find_rows_ = true;
    if (pass_.passed_over_any()) pass_.restart();
  }
  planner_.on_persisted();
}

void RowBook::drop_partitions(const std::vector<int>& partitions) {
  for (const int partition : partitions) planner_.drop_partition(partition);
}

std::vector<int> RowBook::drained(const std::vector<int>& draining) const {
  if (draining.empty()) return {};
  std::vector<int> busy;
  planner_.for_each_known([&](const HeldRow& held) {
    const int partition = held.message.partition;
    if (std::binary_search(draining.begin(), draining.end(), partition)) busy.push_back(partition);
  });
  std::sort(busy.begin(), busy.end());
  std::vector<int> drained;
  std::set_difference(draining.begin(), draining.end(), busy.begin(), busy.end(), std::back_inserter(drained));
  return drained;
}

}  // namespace outboxd::dispatch
