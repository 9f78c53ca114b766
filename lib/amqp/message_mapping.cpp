// Fills the reused proton::message for one outbox row and encodes it.
#include "amqp/message_mapping.hpp"

#include <proton/binary.hpp>
#include <proton/duration.hpp>
#include <proton/message_id.hpp>
#include <proton/timestamp.hpp>

#include "amqp/detail/cloudevents_mapping.hpp"
#include "amqp/detail/headers_mapping.hpp"

namespace outboxd::amqp {
namespace {

core::Status set_ttl(const core::OutboxMessage& row, proton::message& msg) {
  if (!row.ttl) return {};
  const auto ms = row.ttl->count();
  if (ms <= 0) {
    return core::rejected_error("ttl: " + std::to_string(ms) + " ms is not positive");
  }
  if (ms > kMaxTtlMs) {
    return core::rejected_error("ttl: " + std::to_string(ms) + " ms exceeds the AMQP maximum of " +
                                std::to_string(kMaxTtlMs) + " ms");
  }
  msg.ttl(proton::duration(ms));
  return {};
}

void put_column(proton::message& msg, const char* name, const std::optional<std::string>& column) {
  if (column) msg.properties().put(name, *column);
}

core::Status fill(const core::OutboxMessage& row, config::BrokerProfile profile,
                  const config::CloudEventsConfig& cloudevents, proton::message& msg) {
  msg.id(proton::message_id(row.message_id));
  if (row.session_id) msg.group_id(*row.session_id);
  if (row.correlation_id) msg.correlation_id(proton::message_id(*row.correlation_id));
  if (row.subject) msg.subject(*row.subject);
  if (row.content_type) msg.content_type(*row.content_type);
  const auto created = std::chrono::duration_cast<std::chrono::milliseconds>(row.created_at.time_since_epoch());
  msg.creation_time(proton::timestamp(created.count()));
  msg.durable(true);
  if (auto ttl = set_ttl(row, msg); !ttl) return ttl.error();

  if (auto headers = add_header_properties(row.headers_json, msg.properties()); !headers) {
    return headers.error();
  }
  if (cloudevents.applies_to(row.destination)) {
    if (auto event = add_cloud_event(row, cloudevents, msg); !event) return event;
  }
  put_column(msg, kParentMessageIdProperty, row.parent_message_id);
  put_column(msg, kOriginatingMessageIdProperty, row.originating_message_id);
  put_column(msg, kTraceparentProperty, row.traceparent);
  if (profile == config::BrokerProfile::artemis) {
    msg.properties().put(kArtemisDuplicateIdProperty, row.message_id);
  }

  // inferred(true) makes Proton encode a binary body as a data section; with
  // the default (false) the same bytes would go out as an amqp-value.
  // Assigning the binary (not a proton::value holding it) encodes it straight
  // into the message's body, without a pn_data_t of its own to copy from.
  msg.body() = proton::binary(row.body.begin(), row.body.end());
  msg.inferred(true);
  return {};
}

}  // namespace

core::Result<EncodedMessage> MessageEncoder::encode(const core::OutboxMessage& row, config::BrokerProfile profile) {
  try {
    // Also after a row that failed half-way: nothing of it may leak into this one.
    message_.clear();
    if (auto filled = fill(row, profile, cloudevents_, message_); !filled) return filled.error();
    message_.encode(buffer_);  // one pass once the buffer has grown to the largest message
    return EncodedMessage(buffer_.begin(), buffer_.end());
  } catch (const std::exception& e) {
    return core::rejected_error(std::string("cannot encode the message: ") + e.what());
  }
}

}  // namespace outboxd::amqp
