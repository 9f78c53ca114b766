// One claim's result sets as the database returned them, before the claim pass's rules apply.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/outbox_message.hpp"

namespace outboxd::core {

// An immediate row the pass passes over: an earlier row of its session (and
// writer) is a due timeout still pending, or is below the pass's cursor,
// committed after the cursor passed it. Only its id and session_key() are read.
struct PassedOverRow {
  RowId id = 0;
  std::string order;
};

// The rows of one statement (immediate or scheduled), in its order.
struct ClaimedSet {
  std::vector<OutboxMessage> rows;   // rows passed over left out
  std::vector<PassedOverRow> passed_over;
  std::size_t read = 0;              // rows the statement returned, those passed over included
  RowId last_id = 0;                 // of the last row returned, passed over or not; 0 when none
  bool budget_used = false;          // rows past the claim's byte budget were left for the next claim
};

// The byte bounds of one claim. A row's payload is its body and its headers
// (as JSON text): what the claim reads of it into memory.
struct ClaimBytes {
  // Larger messages are not read: returned unsendable. The margin left for
  // the properties and the AMQP framing is pg::kPropertiesMargin.
  std::int64_t max_message = std::numeric_limits<std::int64_t>::max();
  std::int64_t budget = std::numeric_limits<std::int64_t>::max();  // payload bytes per statement, at least one row
};

// The claim by destination, asked for beside the id-order claim while that
// one reads a backlog: the first rows of every other destination, so that a
// backlog in one destination stalls no other.
struct LaneRequest {
  std::size_t limit = 0;          // rows in all; 0: not asked for
  std::size_t per_lane = 0;       // rows of any one destination
  std::string after;              // destinations from just after this name; "" for all
  std::vector<std::string> skip;  // the backlog's destinations, which the id-order claim reads
  // Instead of the id-order claim, not beside it: `skip` lists destinations
  // whose limits hold enough rows already, which no statement may read.
  bool only = false;
  // The one statement sent, between the claims of a pass that reads a
  // backlog: those claims read the rest (dispatch::RowBook::kLanesInterval).
  bool alone = false;
};

// The claim's statements, sent in one pipeline: immediate rows in id order,
// due scheduled rows in due order, the wait until the next one, and when
// asked for, immediate rows by destination (in destination order).
struct ClaimedSets {
  ClaimedSet immediate;
  ClaimedSet scheduled;
  std::optional<std::chrono::milliseconds> next_due;
  ClaimedSet lanes;
  // A snapshot of the database's transactions (pg_snapshot as text) taken
  // before the claim's statements: the pass's next horizon
  // (dispatch::ClaimPass::horizon()). Empty when the database gave none.
  std::string horizon;
  // The immediate claim looked for late commits below the cursor: a
  // transaction other than the daemon's own writes had finished since the
  // horizon it was given, or it was given none.
  bool late_commits_asked = false;
  // Rows in the outbox as the planner's statistics last counted them; empty when unknown.
  std::optional<std::int64_t> table_rows;
};

}  // namespace outboxd::core
