// Merge and cut of a claim's result sets.
#include "dispatch/claim_merge.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>

namespace outboxd::dispatch {

Claim merge_claim(core::ClaimedSets sets, std::size_t limit, std::size_t lanes_limit) {
  Claim claim;
  claim.next_due = sets.next_due;
  claim.last_immediate_id = sets.immediate.last_id;
  core::RowId cut = std::numeric_limits<core::RowId>::max();
  if (limit > 0 && (sets.immediate.read == limit || sets.immediate.budget_used)) {
    cut = sets.immediate.last_id;
    claim.immediate_full = true;
  }
  claim.scheduled_full = limit > 0 && (sets.scheduled.read == limit || sets.scheduled.budget_used);
  auto& immediate = sets.immediate.rows;
  auto& scheduled = sets.scheduled.rows;
  auto by_id = [](const core::OutboxMessage& a, const core::OutboxMessage& b) { return a.id < b.id; };
  std::sort(scheduled.begin(), scheduled.end(), by_id);
  if (claim.immediate_full) {
    for (const auto& row : immediate) {
      if (claim.backlog_destinations.size() == kBacklogDestinations) break;
      if (std::find(claim.backlog_destinations.begin(), claim.backlog_destinations.end(), row.destination) ==
          claim.backlog_destinations.end()) {
        claim.backlog_destinations.push_back(row.destination);
      }
    }
  }
  claim.rows.reserve(immediate.size() + scheduled.size());
  std::merge(std::make_move_iterator(immediate.begin()), std::make_move_iterator(immediate.end()),
             std::make_move_iterator(scheduled.begin()), std::make_move_iterator(scheduled.end()),
             std::back_inserter(claim.rows), by_id);
  claim.rows.erase(std::find_if(claim.rows.begin(), claim.rows.end(),
                                [cut](const core::OutboxMessage& m) { return m.id > cut; }),
                   claim.rows.end());
  auto& lanes = sets.lanes.rows;
  // Destinations come in name order: the next claim by destination goes on after the last one read.
  if (lanes_limit > 0 && sets.lanes.read == lanes_limit && !lanes.empty()) claim.lanes_after = lanes.back().destination;
  if (!lanes.empty()) {
    std::sort(lanes.begin(), lanes.end(), by_id);
    std::vector<core::OutboxMessage> merged;
    merged.reserve(claim.rows.size() + lanes.size());
    std::merge(std::make_move_iterator(claim.rows.begin()), std::make_move_iterator(claim.rows.end()),
               std::make_move_iterator(lanes.begin()), std::make_move_iterator(lanes.end()),
               std::back_inserter(merged), by_id);
    // Either statement may have read a row; both copies are the same row.
    merged.erase(std::unique(merged.begin(), merged.end(),
                             [](const core::OutboxMessage& a, const core::OutboxMessage& b) { return a.id == b.id; }),
                 merged.end());
    claim.rows = std::move(merged);
  }
  claim.passed_over = std::move(sets.immediate.passed_over);
  claim.passed_over.insert(claim.passed_over.end(), std::make_move_iterator(sets.scheduled.passed_over.begin()),
                           std::make_move_iterator(sets.scheduled.passed_over.end()));
  return claim;
}

}  // namespace outboxd::dispatch
