// The daemon's and the CLI's statements on <schema>.messages and <schema>.instances.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "core/claimed_sets.hpp"
#include "core/outbox_message.hpp"
#include "core/result.hpp"
#include "pg/connection.hpp"

namespace outboxd::pg {

// A failed delivery to write back: back off until retry_in from now (database
// clock), or park it. `attempts` is the row's new total, not an increment,
// so writing the same record twice changes nothing.
// What a row's message takes beyond its body and headers: the properties
// (the table's length checks allow 1,664 characters, at most 6,656 bytes)
// and the AMQP sections and framing around them.
constexpr std::int64_t kPropertiesMargin = 8 << 10;

struct FailureRecord {
  core::RowId id = 0;
  int attempts = 0;
  std::chrono::milliseconds retry_in{0};
  std::string error;  // stored as last_error through core::safe_text: valid UTF-8, cut to 1000 bytes
  bool park = false;
};

struct DestinationStatus {
  std::string destination;
  std::int64_t pending = 0;    // status pending: due, scheduled and retrying together
  std::int64_t due = 0;        // pending and due now, not backing off
  std::int64_t scheduled = 0;  // pending with due_at still ahead
  std::int64_t retrying = 0;   // pending and backing off after a failure
  std::int64_t parked = 0;
  // How long the oldest due pending row has waited since its due_at
  // (created_at for immediate rows); nullopt when none is due.
  std::optional<std::chrono::milliseconds> oldest_pending_age;
};

struct StatusReport {
  DestinationStatus total;  // destination empty
  std::vector<DestinationStatus> destinations;  // by name
};

// The backlog of one destination in the partitions asked about, for /metrics.
// Counts stop at the cap they were asked with.
struct DestinationBacklog {
  std::string destination;
  std::int64_t due = 0;        // pending, not failed yet, due_at reached (in flight included)
  std::int64_t scheduled = 0;  // pending, not failed yet, due_at ahead
  std::int64_t retrying = 0;   // pending after a failure (next_attempt_at set): backing off or due again
  std::int64_t parked = 0;
  // Seconds since the due_at of the oldest due row (0 when none is due), and
  // until the due_at of the next scheduled row; database clock.
  double oldest_due_age = 0;
  std::optional<double> next_due_in;
};

struct BacklogReport {
  std::vector<DestinationBacklog> destinations;  // by name
  std::int64_t left_out = 0;  // destinations with rows that were not listed (backlog() counts them)
  bool beyond_bound = false;  // more destinations have rows than may be listed
};

// Byte positions in the primary's WAL (pg_lsn - '0/0'): how far it goes, and
// how far the standby asked for has flushed it (none: no such standby reports).
struct StandbyPosition {
  std::int64_t wal = 0;
  std::optional<std::int64_t> flushed;
};

// What OutboxStore::purge_failed() deleted.
struct FailedPurge {
  int rows = 0;    // cancelled rows
  int events = 0;  // row_events
};

// What `outboxd fire` changed, with the database's account of who and when.
struct FireReport {
  int rows = 0;
  std::string by;  // session_user
  std::string at;  // the new due_at
};

class OutboxStore {
 public:
  // The schema is quoted into the statement texts once, here; every value
  // travels as a bound parameter. Statements are prepared on first use.
  OutboxStore(Connection& connection, std::string schema);
  // The statements it defines for outbox schema `schema`, by name.
  static NamedStatements statements(const std::string& schema);

  // Prepares every statement now, so that a missing schema or privilege
  // shows up at start-up (fatal) rather than at the first claim.
  core::Status prepare();

  // Due pending rows of these partitions whose session is not blocked by a
  // parked or backing-off earlier row, in id order: at most `limit`
  // immediate rows (lowest ids) and `limit` scheduled ones (earliest due_at).
  // No lock or transaction outlives the call.
  // Known gap: with more than `limit` scheduled rows due at once, a session
  // whose later-inserted row falls due before an earlier-inserted one can
  // receive them across two claims in due order rather than id order.
  //
  // Immediate rows are read from just above `after_id`: the caller walks the
  // backlog in passes, and starts a new pass from 0 once a claim comes back
  // short, which finds rows whose transactions committed late with lower ids.
  // Rows whose ids are in `known` (the caller has them already) are left out
  // and do not count towards `limit`, so a new pass reads none of them again.
  // The two batches come back as read, with time_to_next_due() as of the
  // claim (three or four statements in one pipeline: one round trip, one
  // transaction); dispatch::merge_claim() makes them one batch.
  //
  // `bytes` bounds what each statement reads into memory (outbox_sql.hpp):
  // a row whose body and headers exceed max_message less kPropertiesMargin
  // comes back unsendable, without them; once the rows read reach the
  // budget, the rest are left for the next claim (ClaimedSet::budget_used).
  //
  // With `lanes` asked for, a fourth statement in the same pipeline reads
  // immediate rows by destination (outbox_sql::claim_lanes), returned as
  // ClaimedSets::lanes; they may repeat rows of the id-order batch.
  //
  // Past the start of a pass the immediate claim asks whether a row below
  // the cursor committed late only when a transaction other than the
  // connection's own writes since its last claim has finished since `horizon`
  // (outbox_sql.cpp, late_commits_possible()); without a horizon it always
  // asks. The claim returns the next horizon (ClaimedSets::horizon).
  core::Result<core::ClaimedSets> claim(const std::vector<int>& partitions, int limit, core::RowId after_id = 0,
                                        std::span<const core::RowId> known = {}, const core::ClaimBytes& bytes = {},
                                        const core::LaneRequest& lanes = {},
                                        const std::optional<std::string>& horizon = std::nullopt);
  // ANALYZE of the outbox, as its owner (025_refresh_statistics.sql): the
  // daemon's generic plans are made again with it.
  core::Status refresh_statistics();

  // The broker accepted these rows. One statement: UPDATE to dispatched
  // (retention keep) or DELETE (delete_rows). Only pending rows change.
  // Marking and failures are separate autocommit statements, not one
  // transaction: BEGIN/COMMIT would add two round trips to save one, and
  // both are idempotent, so repeating one after an unknown outcome
  // (Connection::last_failure().outcome_unknown) is safe. Fenced: only rows
  // of partitions `owner` still leases unexpired change; the others are left
  // for their next owner (see fence() in outbox_sql.cpp). Returns the rows changed.
  core::Result<int> mark_dispatched(const std::vector<core::RowId>& ids, config::RetentionMode mode,
                                    std::string_view owner);
  // Backoffs and parks, one statement for the whole batch; fenced the same way.
  core::Result<int> record_failures(const std::vector<FailureRecord>& failures, std::string_view owner);

  // Time until the earliest scheduled row or backoff in these partitions falls
  // due (database clock, rounded up); nullopt when nothing is waiting.
  core::Result<std::optional<std::chrono::milliseconds>> time_to_next_due(const std::vector<int>& partitions);

  // Deletes up to `batch` rows dispatched more than keep_for ago; returns how many.
  core::Result<int> purge(std::chrono::milliseconds keep_for, int batch);
  // Deletes up to `batch` rows cancelled, and up to `batch` row events
  // written, more than keep_for ago (at least an hour: see purge_row_events()).
  core::Result<FailedPurge> purge_failed(std::chrono::milliseconds keep_for, int batch);

  // Upserts this instance's row: armed (the row's idle flag) makes inserts NOTIFY the wake-up channel.
  core::Status arm_notify(std::string_view instance_id, bool armed);
  // Transactions of this database in progress right now (ids as text), and
  // which of those are still in progress later: a writer that looked for an
  // idle instance before arm_notify(true) committed sends no NOTIFY; see
  // dispatch::LateCommitWatch.
  core::Result<std::vector<std::string>> open_transactions();
  core::Result<std::vector<std::string>> still_open(const std::vector<std::string>& transactions);
  // The primary's WAL position now and what `standby` (its application_name;
  // none: the most advanced) has flushed: see database.wait_for_standby.
  core::Result<StandbyPosition> standby_position(const std::optional<std::string>& standby);
  // LISTEN on "<schema>_wakeup" (kept across Connection::reset()).
  core::Status listen();
  const std::string& channel() const { return channel_; }

  // For /metrics: the backlog of these partitions for at most
  // `max_destinations` destinations, each count stopping at `count_cap`.
  // Beyond `max_destinations` destinations with pending or parked rows in
  // any partition, those listed are the ones that owe the most rows, then
  // have waited longest (the rule in outbox_backlog.cpp). Index lookups only
  // (015_backlog_index.sql); beyond `max_destinations`, the ranking reads up
  // to `count_cap` entries of every destination, see outbox_backlog.cpp.
  core::Result<BacklogReport> backlog(const std::vector<int>& partitions, int count_cap, int max_destinations);
  // The same figures for `destinations` (those a ranking by backlog() chose,
  // not empty), while more than `max_destinations` have rows (beyond_bound;
  // left_out is not counted then, 0); otherwise for every destination, as
  // backlog() lists them. Costs what backlog() costs with `max_destinations`
  // destinations or fewer, whatever the number of destinations beyond.
  core::Result<BacklogReport> backlog_of(const std::vector<int>& partitions, int count_cap, int max_destinations,
                                         const std::vector<std::string>& destinations);

  // For `outboxd status`: counts per destination and in total.
  core::Result<StatusReport> status();
  // Scheduled rows (pending, due later) of `message_id`, or of `session_id`
  // when it is not empty, of `writer` when it is not empty, become due now,
  // each with a fired event naming `os_user` (if not empty), and a NOTIFY
  // follows. An id or session that names rows of several writers needs the writer.
  core::Result<FireReport> fire(std::string_view message_id, std::string_view session_id = {},
                                std::string_view os_user = {}, std::string_view writer = {});

 private:
  core::Result<Rows> run(std::string_view name, const Params& params, ResultFormat format = ResultFormat::text);
  // claim() with LaneRequest::alone: the claim by destination, its one statement.
  core::Result<core::ClaimedSets> claim_lanes_alone(const Connection::PreparedCall& call, const core::ClaimBytes& bytes,
                                                    std::int64_t max_payload, std::int64_t budget);
  core::Status notify();
  // The rows changed by one of own_write()'s statements; its transaction id
  // is noted on the connection (Connection::note_own_transaction).
  core::Result<int> own_write(const core::Result<Rows>& rows, const char* context);

  Connection& connection_;
  std::string schema_;
  std::string table_;  // "schema".messages
  std::string channel_;
  std::string prefix_;  // of this store's prepared statement names
  NamedStatements statements_;
};

}  // namespace outboxd::pg
