// Durations as operators type them on the command line: 90s, 10m, 2h, 7d.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace outboxd::daemon {

// A whole number followed by s, m, h or d, at most ten years; nullopt otherwise.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace outboxd::daemon
