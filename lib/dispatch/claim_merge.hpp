// A claim's two result sets made one id-ordered batch: the cut that keeps every session in id order.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/claimed_sets.hpp"
#include "core/outbox_message.hpp"

namespace outboxd::dispatch {

// The rows of one claim as the claim pass uses them.
struct Claim {
  std::vector<core::OutboxMessage> rows;  // in id order
  bool immediate_full = false;            // the immediate batch hit the limit or its budget: the pass goes on
  bool scheduled_full = false;            // so did the due scheduled batch: more are due
  core::RowId last_immediate_id = 0;      // where the next claim of this pass starts
  // Immediate rows left out because an earlier row of their session is a due
  // timeout still pending or a late commit below the cursor. The pass moves
  // past them, so their sessions' later rows wait until the next pass finds them.
  std::vector<core::PassedOverRow> passed_over;
  std::optional<std::chrono::milliseconds> next_due;  // as of the claim
  // Of a full immediate batch, its destinations (a backlog's): the claim by
  // destination leaves them to the id-order pass. At most kBacklogDestinations.
  std::vector<std::string> backlog_destinations;
  // The claim by destination was full: the next goes on after this destination.
  std::optional<std::string> lanes_after;
  bool more() const { return immediate_full || scheduled_full || lanes_after.has_value(); }
};

inline constexpr std::size_t kBacklogDestinations = 32;

// Merges the immediate, the scheduled and the rows by destination by id, each
// row once. A full immediate batch
// (`limit` rows, or its byte budget used) may have left out rows above its last id; a scheduled row
// above that id waits for the next claim too, so that no session sees a
// higher id before a lower one. Fullness and the cursor count the rows held
// back too: the pass moves past them (they are found again by the next pass
// or the next claim after their timeout is marked). Rows by destination are
// not cut: the claim kept each behind any unclaimed earlier row of its session.
Claim merge_claim(core::ClaimedSets sets, std::size_t limit, std::size_t lanes_limit = 0);

}  // namespace outboxd::dispatch
