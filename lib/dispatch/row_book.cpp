// The rows held from claim to mark: the claim pass's rules, payloads by id, and the planner kept beside them.
#include "dispatch/row_book.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

#include "dispatch/claim_merge.hpp"

namespace outboxd::dispatch {

namespace {

RowRef row_ref(const core::OutboxMessage& row) {
  return {row.id, row.session_id.value_or(std::string()), row.attempts, row.partition};
}

}  // namespace

RowBook::RowBook(PlannerPolicy policy, const core::Clock& clock, core::RandomSource& random)
    : planner_(std::move(policy), clock, random) {}

void RowBook::restart_pass() {
  pass_.restart();
  claim_may_find_rows_ = true;
}

// The rows held that the claim could return again: immediate rows ahead of
// the pass's cursor, and timeouts (the timeout claim has no cursor). Left out
// by the claim, they cost it nothing and leave its batch to new rows.
RowBook::ClaimRequest RowBook::claim_request(std::size_t batch_size) const {
  ClaimRequest request{std::min(planner_.claim_room(), batch_size), pass_.cursor(), {}};
  for (const auto& [id, held] : rows_) {
    if (id > pass_.cursor() || held.message.due_at) request.known.push_back(id);
  }
  return request;
}

RowBook::Claimed RowBook::on_claim(core::ClaimedSets sets, const ClaimRequest& request, core::SteadyTime started) {
  Claimed claimed;
  auto claim = merge_claim(std::move(sets), request.limit);
  claimed.rows = claim.rows.size();
  // A row held back behind a due timeout is passed over by this pass; its
  // session's later rows must wait for the next pass too, or they would
  // overtake it once the timeout is marked.
  for (const auto& held : claim.held_back) pass_.pass_over(held.id, held.session);
  std::vector<RowRef> refs;
  refs.reserve(claim.rows.size());
  for (auto& row : claim.rows) {
    if (planner_.knows(row.id) || pass_.waits(row.id, row.session_id)) continue;
    refs.push_back(row_ref(row));
    const auto due_since = started - row.due_for;
    rows_.insert_or_assign(row.id, HeldRow{std::move(row), due_since});
  }
  claimed.added = planner_.add(refs);
  // Rows the planner refused (their session's park is not persisted yet).
  for (const auto& ref : refs) {
    if (!planner_.knows(ref.id)) rows_.erase(ref.id);
  }
  pass_.on_claim(claim.immediate_full, claim.last_immediate_id);
  claimed.more = claim.more();
  if (!claimed.more) {
    claim_may_find_rows_ = false;
    claimed.next_due = claim.next_due;
  }
  return claimed;
}

std::vector<core::OutboxMessage> RowBook::take_ready() {
  const auto ids = planner_.take_ready();
  std::vector<core::OutboxMessage> ready;
  ready.reserve(ids.size());
  for (const auto id : ids) ready.push_back(rows_.at(id).message);
  return ready;
}

std::optional<core::SteadyTime> RowBook::due_since(core::RowId id) const {
  const auto row = rows_.find(id);
  if (row == rows_.end()) return std::nullopt;
  return row->second.due_since;
}

const core::OutboxMessage* RowBook::find(core::RowId id) const {
  const auto row = rows_.find(id);
  return row == rows_.end() ? nullptr : &row->second.message;
}

// If this pass moved past rows held back behind a timeout now marked, a new
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
  forget_dropped();
}

void RowBook::drop_partitions(const std::vector<int>& partitions) {
  if (partitions.empty()) return;
  for (const int partition : partitions) planner_.drop_partition(partition);
  forget_dropped();
}

std::vector<int> RowBook::drained(const std::vector<int>& draining) const {
  if (draining.empty()) return {};
  std::vector<int> busy;
  for (const auto& [id, row] : rows_) {
    if (planner_.knows(id) && std::binary_search(draining.begin(), draining.end(), row.message.partition)) {
      busy.push_back(row.message.partition);
    }
  }
  std::sort(busy.begin(), busy.end());
  std::vector<int> drained;
  std::set_difference(draining.begin(), draining.end(), busy.begin(), busy.end(), std::back_inserter(drained));
  return drained;
}

// A row forgotten earlier may have been claimed and added again since.
void RowBook::forget_dropped() {
  for (const auto id : planner_.take_forgotten()) {
    if (!planner_.knows(id)) rows_.erase(id);
  }
}

}  // namespace outboxd::dispatch
