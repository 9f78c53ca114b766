// One claimed outbox row as the dispatcher sees it, and what the broker said about it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/shared_bytes.hpp"

namespace outboxd::core {

using RowId = std::int64_t;

// Column values of outbox.messages needed to publish a row. Nullable columns
// are optionals; `body` holds the bytes exactly as written, shared by the
// copies of the row (the planner's and the one sent), never copied.
struct OutboxMessage {
  RowId id = 0;
  // The outbox the row came from: its index among the daemon's outboxes, for
  // routing the outcome back, and its name, stamped on the message. 0 and
  // null in a daemon of one outbox. The name is shared, not a string of the
  // row's own: a row is moved about half a dozen times between its claim and
  // its outcome, and a string member costs each move a copy.
  std::uint32_t outbox = 0;
  std::shared_ptr<const std::string> outbox_name;
  std::string message_id;
  std::string destination;
  std::optional<std::string> session_id;
  std::optional<std::string> writer;  // messages.writer: the login role that inserted it; none before 009
  std::optional<std::string> correlation_id;
  std::optional<std::string> parent_message_id;
  std::optional<std::string> originating_message_id;
  std::optional<std::string> subject;
  std::optional<std::string> content_type;
  std::optional<std::string> traceparent;
  std::string headers_json = "{}";  // jsonb object as text
  SharedBytes body;
  std::optional<std::chrono::milliseconds> ttl;
  std::chrono::system_clock::time_point created_at;
  std::optional<std::chrono::system_clock::time_point> due_at;
  int attempts = 0;
  int partition = 0;
  // How long the row had been due when it was claimed, on the database's
  // clock: since created_at, due_at for a timeout, or the end of a backoff.
  std::chrono::microseconds due_for{0};
  // Set when the claim left the body and headers out because the row cannot
  // be sent (too large for the broker): why. The row is parked when its turn
  // comes, never published.
  std::optional<std::string> unsendable;
};

// A delivery as the publisher knows it. Row ids are unique within one outbox
// only, and one publisher serves every outbox of the daemon: two outboxes may
// hand it rows of the same id at once.
struct DeliveryKey {
  std::uint32_t outbox = 0;
  RowId id = 0;

  bool operator==(const DeliveryKey&) const = default;
};

inline DeliveryKey delivery_key(const OutboxMessage& row) { return {row.outbox, row.id}; }

// "row 42", or "row 42 of outbox 3" beyond the first outbox: for reasons and logs.
std::string describe(const DeliveryKey& key);

// A row's session: its session id as its writer wrote it, the C++ twin of
// the SQL same_session() and session_key() (lib/pg/session_order_sql.cpp).
// Rows of one session_id from different writers are ordered, blocked and
// kept behind timeouts apart, so that no writer's parked row blocks another's;
// rows without a writer (written before 009) are a writer of their own. The
// key is the session id, then NUL and the writer when there is one:
// PostgreSQL text holds no NUL, so no two sessions share a key.
std::string session_key(const std::optional<std::string>& writer, std::string_view session);
// None for a row without session: it waits for nothing.
std::optional<std::string> session_key(const OutboxMessage& row);

// The broker's settlement of one delivery, or its absence.
enum class DeliveryOutcome {
  accepted,
  rejected,    // the broker refused the message
  unsendable,  // the row cannot be made into a message (headers, destination): parked at once
  released,  // released or modified: the broker did not process it; try again
  unknown,   // no outcome in time, or the link ended before one arrived: publish again
  connection_lost,  // the connection ended before an outcome arrived: an attempt for no row; read it again
  not_sent,  // not sent because its fencing deadline passed: the lease may be gone
};

const char* to_string(DeliveryOutcome outcome);

}  // namespace outboxd::core

template <>
struct std::hash<outboxd::core::DeliveryKey> {
  std::size_t operator()(const outboxd::core::DeliveryKey& key) const noexcept {
    // Row ids are dense and outboxes few: the outbox goes to the high bits.
    return std::hash<std::uint64_t>{}(static_cast<std::uint64_t>(key.id) ^ (std::uint64_t{key.outbox} << 40));
  }
};
