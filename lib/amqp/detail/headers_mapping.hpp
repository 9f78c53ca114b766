// The `headers` JSON column as AMQP application properties.
#pragma once

#include <string_view>

#include <proton/message.hpp>

#include "core/result.hpp"

namespace outboxd::amqp {

// Puts every member of the JSON object `json` into `properties`. Strings stay
// strings, booleans booleans, integers become long (a larger unsigned integer
// is an error), other numbers double. Empty text counts as {}.
core::Status add_header_properties(std::string_view json, proton::message::property_map& properties);

}  // namespace outboxd::amqp
