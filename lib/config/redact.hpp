// Removing passwords from connection strings before they reach a log line or an error message.
#pragma once

#include <string>
#include <string_view>

namespace outboxd::config {

// Returns the text with any password removed: the ":password" of a URI's user
// info (postgresql://, amqp://, ...), a "password" query parameter, and a
// password=... pair of a libpq conninfo string. Anything else is left as is.
std::string redact(std::string_view url);

}  // namespace outboxd::config
