// Fills the reused proton::message for one outbox row and encodes it, the body appended as its data section.
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
  put_column(msg, kWriterProperty, row.writer);
  if (row.outbox_name) msg.properties().put(kOutboxProperty, *row.outbox_name);
  if (profile == config::BrokerProfile::artemis) {
    msg.properties().put(kArtemisDuplicateIdProperty, duplicate_id(row));
  }

  return {};
}

// The body's data section as Proton encodes a binary body with inferred(true):
// descriptor 0x75, then vbin8 up to 255 bytes, vbin32 beyond.
std::vector<char> data_section_head(std::size_t body_size) {
  std::vector<char> head{'\x00', '\x53', '\x75'};
  if (body_size < 256) {
    head.push_back('\xa0');
    head.push_back(static_cast<char>(body_size));
  } else {
    head.push_back('\xb0');
    for (int shift = 24; shift >= 0; shift -= 8) head.push_back(static_cast<char>((body_size >> shift) & 0xff));
  }
  return head;
}

}  // namespace

std::string duplicate_id(const core::OutboxMessage& row) {
  std::string id;
  if (row.outbox_name) id = *row.outbox_name + '\x1f';
  id += row.message_id;
  if (row.writer) id += '\x1f' + *row.writer;
  return id;
}

// Proton encodes the sections before the body (no body is set, so it writes
// none); the data section goes after them straight from the row's bytes, the
// last section as no footer is written. The body is so copied once, into a
// result of its exact size: no proton::binary, no copy in the message's
// pn_data_t, no encode buffer that keeps the largest message's size.
core::Result<EncodedMessage> MessageEncoder::encode(const core::OutboxMessage& row, config::BrokerProfile profile) {
  try {
    // Also after a row that failed half-way: nothing of it may leak into this one.
    message_.clear();
    if (auto filled = fill(row, profile, cloudevents_, message_); !filled) return filled.error();
    message_.encode(buffer_);  // one pass once the buffer has grown to the largest sections
    const auto head = data_section_head(row.body.size());
    EncodedMessage bytes;
    bytes.reserve(buffer_.size() + head.size() + row.body.size());
    bytes.insert(bytes.end(), buffer_.begin(), buffer_.end());
    bytes.insert(bytes.end(), head.begin(), head.end());
    bytes.insert(bytes.end(), row.body.begin(), row.body.end());
    return bytes;
  } catch (const std::exception& e) {
    return core::rejected_error(std::string("cannot encode the message: ") + e.what());
  }
}

}  // namespace outboxd::amqp
