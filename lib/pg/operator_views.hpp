// What `outboxd parked`, `show` and `timeline` read: rows, their audit trail, receipts and workflow, as JSON documents.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "pg/connection.hpp"

namespace outboxd::pg {

// Which failed rows `parked` lists; empty fields do not filter.
struct ParkedFilter {
  bool retrying = false;  // also pending rows with failed attempts
  std::string destination;
  std::string session_id;
  std::optional<std::chrono::milliseconds> older_than;  // first failed (or written) longer ago
  int limit = 100;
};

// At most `limit` documents (one JSON object per row, as built by the
// statement) and how many matched in all.
struct Listing {
  std::vector<std::string> rows;
  std::int64_t matched = 0;
};

struct RowHistory {
  // Every column, the body as body_bytes and body_head (its first 96 bytes
  // in hex); nullopt when no row has the id (never written, or purged), or
  // when several writers' rows have it and no writer was named.
  std::optional<std::string> row;
  std::int64_t row_id = 0;  // the row's id, when there is one
  // row_events of the row, oldest first; of the message id when no row has it.
  std::vector<std::string> events;
  // The writers whose rows have the id, when more than one has and none was
  // named: a message id is its writer's own, so the caller must choose.
  std::vector<std::string> writers;
};

struct SessionTimeline {
  Listing rows;                              // in id order
  std::vector<std::string> workflow_states;  // outbox.workflow_states(session)
};

// What one correlation id produced: its newest rows (each with its events
// and inbox receipts) and its workflow state records.
struct Conversation {
  // In id order, the newest `limit` below the id asked from. Each is a JSON
  // object of the row's columns that the timeline shows, its state, its
  // events (row_events, oldest first, at most kEventsPerRow) and its receipts
  // (message_receipts(), at most 100).
  std::vector<std::string> rows;
  bool more = false;  // older rows exist below the first
  std::vector<std::string> workflow_states;  // conversation_states()
};

// Which row_events the audit trail lists; empty fields do not filter.
struct AuditFilter {
  std::string message_id;
  std::string session_id;  // the session of the event's row, while the row exists
  std::string db_role;
  std::string since;  // times PostgreSQL reads (timestamptz input)
  std::string until;
  int limit = 200;
};

// The first bytes of a row's body and its size.
struct BodyPrefix {
  std::string bytes;
  std::int64_t size = 0;
  std::string content_type;
};

// Read-only; each call is one transaction with TimeZone UTC, so times read
// the same everywhere and a row and its events come from one snapshot.
class OperatorViews {
 public:
  OperatorViews(Connection& connection, const std::string& schema);

  core::Result<Listing> parked(const ParkedFilter& filter);
  // The row with message_id, of `writer` when it is not empty.
  core::Result<RowHistory> show(const std::string& message_id, const std::string& writer = {});
  core::Result<SessionTimeline> timeline(const std::string& session_id, int limit);
  // The conversation's newest `limit` rows with an id below `before` (0: the newest of all).
  core::Result<Conversation> conversation(const std::string& correlation_id, int limit, std::int64_t before = 0);
  static constexpr int kEventsPerRow = 50;
  // What an id a person typed names: a row's message id first, then a
  // correlation id; neither: a session id, which is not looked up (no index
  // holds every row's session; the session page reads what there is).
  enum class IdKind { message, conversation, session };
  core::Result<IdKind> kind_of(const std::string& id);
  // row_events newest first, each with its row's session_id (null once the
  // row is purged); an unreadable time is the database's error.
  core::Result<Listing> audit(const AuditFilter& filter);
  // Rows ever inserted into the outbox table, as the statistics count them:
  // a busy writer's inserts show within a second or so, an idle session's
  // within 10 s (PostgreSQL 15 flushes them then); a statistics reset
  // restarts the count.
  core::Result<std::int64_t> inserted_total();
  // nullopt when no row has the id.
  core::Result<std::optional<BodyPrefix>> body(std::int64_t row_id, int max_bytes);

 private:
  template <class Read>
  auto in_utc(const char* context, Read read) -> decltype(read());

  Connection& connection_;
  std::string schema_;  // quoted
  std::string table_;   // "schema".messages
};

}  // namespace outboxd::pg
