// The `headers` JSON column as AMQP application properties.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include <proton/message.hpp>

#include "core/result.hpp"

namespace outboxd::amqp {

// Puts every member of the JSON object `json` into `properties`. Strings stay
// strings, booleans booleans, integers become long (a larger unsigned integer
// is an error), other numbers double. Empty text counts as {}.
core::Status add_header_properties(std::string_view json, proton::message::property_map& properties);

// The reserved key prefixes (lower case, compared without case) and the keys
// reserved whole: a header that would set a broker's own property. The SQL
// rule (sql/009_writer_isolation.sql) lists the same.
std::span<const std::string_view> reserved_header_prefixes();
std::span<const std::string_view> reserved_header_keys();

// C0 controls, DEL and C1 controls (U+0080..U+009F): refused in header keys,
// and not allowed in a CloudEvents String.
bool has_control(std::string_view text);

// A header key as errors show it (they reach logs and last_error): JSON-quoted
// and escaped, so no raw control character, and cut after 64 characters.
std::string shown_key(std::string_view key);

}  // namespace outboxd::amqp
