// A row's message as a CloudEvent in the AMQP binding's binary content mode (docs/cloudevents.md).
#pragma once

#include <proton/message.hpp>

#include "config/config.hpp"
#include "core/outbox_message.hpp"
#include "core/result.hpp"

namespace outboxd::amqp {

// Run after the headers are in the application properties and before the
// columns' own properties (which stay plain). Adds id, source, specversion,
// type, time and (with a session_id) subject under the configured prefix;
// datacontenttype is the content-type the message already carries. A header
// whose key is an extension name (core::is_extension_name) and whose value is
// a string without control characters, a boolean or an integer within 32 bits
// moves under the prefix;
// every other header stays a plain property.
// Errors (kind rejected): no subject and no default_type; a header key that
// starts with either CloudEvents prefix.
core::Status add_cloud_event(const core::OutboxMessage& row, const config::CloudEventsConfig& cloudevents,
                             proton::message& msg);

}  // namespace outboxd::amqp
