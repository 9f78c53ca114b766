// Maps an outbox row to the encoded AMQP 1.0 message that carries it (column by column: docs/sql.md, enqueue).
#pragma once

#include <utility>
#include <vector>

#include <proton/message.hpp>

#include "config/config.hpp"
#include "core/outbox_message.hpp"
#include "core/result.hpp"

namespace outboxd::amqp {

// Application properties that the mapping fills from columns. A column that
// is set wins over a `headers` entry of the same name; when the column is
// NULL, a header of that name passes through unchanged.
inline constexpr const char* kParentMessageIdProperty = "parent_message_id";
inline constexpr const char* kOriginatingMessageIdProperty = "originating_message_id";
inline constexpr const char* kTraceparentProperty = "traceparent";

// The login role that wrote the row (messages.writer), absent for rows of no
// writer. A message id is its writer's own, so a consumer's inbox dedupes on
// this and the message-id together. Writers may not use header keys that
// start with "outboxd_" (headers_problem() in SQL, the mapper here).
inline constexpr const char* kWriterProperty = "outboxd_writer";

// The name of the outbox the row came from, when the daemon serves several
// (OutboxMessage::outbox_name); absent otherwise. Message ids are each
// outbox's own as well, so a consumer of several outboxes dedupes on this too.
// Under the same reserved "outboxd_" prefix, so no writer can forge it.
inline constexpr const char* kOutboxProperty = "outboxd_outbox";

// Artemis duplicate detection: with this property set to duplicate_id(),
// Artemis drops a re-publish of a row whose first outcome was lost (it wins
// over a header of the same name), and never another writer's or another
// outbox's message with the same id. Other profiles do not get it.
inline constexpr const char* kArtemisDuplicateIdProperty = "_AMQ_DUPL_ID";

// The outbox's name and U+001F when the row has one, the message id, then
// U+001F and the writer when the row has one. No two rows of a daemon share
// it: its rows all have a name or none, and neither a name nor a message id
// holds a control character, so each U+001F ends the part before it.
std::string duplicate_id(const core::OutboxMessage& row);

// The largest header.ttl AMQP can carry (a uint of milliseconds).
inline constexpr std::int64_t kMaxTtlMs = 0xFFFFFFFFLL;

// A message's bytes as proton::message::encode() writes them: what a
// delivery carries.
using EncodedMessage = std::vector<char>;

// properties: message-id (string) = message_id, group-id = session_id,
// correlation-id (string), subject, content-type, creation-time = created_at;
// header: durable = true, ttl = ttl; body: exactly one data section with the
// row's bytes (never an amqp-value, also for an empty body);
// application-properties: the `headers` JSON object (string -> string,
// integer -> long, other number -> double, boolean -> boolean) plus the
// columns above.
// Errors (kind rejected): headers that are not a JSON object or hold null,
// arrays or objects; a ttl that is not positive or exceeds kMaxTtlMs.
// For a destination that `cloudevents` applies to, the message is also a
// CloudEvent in binary content mode (detail/cloudevents_mapping.hpp, with its
// own errors); for every other destination it is exactly as above.
//
// One proton::message is cleared and filled again for every row, and encoded
// into one growing buffer: a fresh proton::message per row (a pn_message_t
// with four pn_data_t and eight strings, allocated and freed again) cost the
// daemon a fifth of its instructions per row. The body never enters that
// message: its data section is appended to the encoded sections, so the body
// is copied once, into the result. Each result has the bytes a fresh message
// with the body set would encode to. One encoder per thread.
class MessageEncoder {
 public:
  explicit MessageEncoder(config::CloudEventsConfig cloudevents = {}) : cloudevents_(std::move(cloudevents)) {}

  core::Result<EncodedMessage> encode(const core::OutboxMessage& row, config::BrokerProfile profile);

 private:
  config::CloudEventsConfig cloudevents_;
  proton::message message_;
  std::vector<char> buffer_;
};

}  // namespace outboxd::amqp
