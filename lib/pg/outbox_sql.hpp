// Statement texts of OutboxStore (internal to lib/pg); `t` is the quoted "schema".messages.
#pragma once

#include <string>

namespace outboxd::pg::outbox_sql {

// Columns of a claimed row, in this order.
enum Column {
  kId, kMessageId, kDestination, kSessionId, kWriter, kCorrelationId, kParentMessageId, kOriginatingMessageId,
  kSubject, kContentType, kTraceparent, kHeaders, kBody, kTtlMs, kCreatedAt, kDueAt, kScheduled,
  kAttempts, kPartition, kDueForUs, kPayloadBytes, kDestinationRefused, kPassedOver, kColumnCount
};
// The immediate claim's one column more: whether it asked for late commits
// below the cursor (late_commits_possible() in outbox_sql.cpp).
inline constexpr int kLateCommitsAsked = kColumnCount;

// The claims return every row's payload size (body and headers as JSON
// text), but its body and headers only while the row is no larger than the
// inline limit, a share of the byte budget per row: no claim then reads more
// than the budget inline, and no window over the rows (a tenth of the
// claim's cost) is needed. payloads() reads the larger rows afterwards,
// within the rest of the budget. `s` is the quoted schema (for
// settings.allowed_destinations, 016, and destination_charset, 021).
std::string claim_immediate(const std::string& s, const std::string& t);
std::string claim_scheduled(const std::string& s, const std::string& t);
// Immediate rows of the destinations other than those of a backlog, a few of each.
std::string claim_lanes(const std::string& s, const std::string& t);
// Sent before the claims: the pass's next horizon and the outbox's row estimate ($1 the table).
std::string claim_horizon();
std::string refresh_statistics(const std::string& schema);
// Columns: id, headers, body; see outbox_sql.cpp.
std::string payloads(const std::string& t);
// The three writes return one row: rows changed, and their transaction id (NULL: none taken).
std::string mark_dispatched(const std::string& t, const std::string& leases);
// delete_dispatched and the purges call the schema's functions (028): the dispatcher may not DELETE.
std::string delete_dispatched(const std::string& schema);
std::string record_failures(const std::string& t, const std::string& leases);
std::string time_to_next_due(const std::string& t);
// Its expression: ms until the next scheduled row or backoff, NULL for none;
// of the partitions `partitions` (an int[] parameter), or of all with nullptr.
std::string next_due_ms(const std::string& t, const char* partitions);
// purge and purge_cancelled: $1 keep_for in ms, $2 the batch; one row, how many were deleted.
std::string purge(const std::string& schema);
// $1 partitions, $2 count cap, $3 destinations listed; `s` for settings.partition_count; defined in
// outbox_backlog.cpp. backlog_of: $4 the destinations to list past $3 (text[]).
std::string backlog(const std::string& s, const std::string& t);
std::string backlog_of(const std::string& t);
std::string purge_cancelled(const std::string& schema);
std::string purge_events(const std::string& schema);
// The channel the insert trigger NOTIFYs while an instance is idle (026_insert_cost.sql), unquoted.
std::string wakeup_channel(const std::string& schema);
std::string set_idle(const std::string& instances);
std::string open_transactions();
std::string still_open();
std::string standby_position(const std::string& function);

}  // namespace outboxd::pg::outbox_sql
