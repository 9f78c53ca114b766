// Strict conversions of scalar text to numbers and booleans, and quoting of values in messages (internal).
// yaml-cpp's own conversions are too lenient for a config: as<int> reads "010" as 8 and "0x10" as 16,
// as<bool> takes yes, on, y and True, as<double> takes .inf and .nan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace outboxd::config {

// Decimal digits with an optional sign; nothing else (no 0x, 1e3, 1_000, 1.0).
std::optional<std::int64_t> parse_integer(std::string_view text);

// A finite decimal number such as 2, 0.25 or 1.5e1.
std::optional<double> parse_number(std::string_view text);

// Exactly true or false (YAML 1.2's JSON schema): no yes, on, y, True or TRUE.
std::optional<bool> parse_bool(std::string_view text);

// The value in double quotes for an error message: control characters
// escaped, long values shortened.
std::string quote_value(std::string_view text);

bool has_control_characters(std::string_view text);

}  // namespace outboxd::config
