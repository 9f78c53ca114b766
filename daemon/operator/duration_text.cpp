// Parsing the --older-than, --since and --until durations of the operator commands.
#include "daemon/operator/duration_text.hpp"

#include <charconv>
#include <cstdint>

namespace outboxd::daemon {
namespace {

constexpr std::int64_t kMaxSeconds = 10LL * 366 * 24 * 3600;

std::optional<std::int64_t> unit_seconds(char unit) {
  switch (unit) {
    case 's': return 1;
    case 'm': return 60;
    case 'h': return 3600;
    case 'd': return 86400;
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  if (text.size() < 2) return std::nullopt;
  const auto unit = unit_seconds(text.back());
  if (!unit) return std::nullopt;
  const std::string_view digits = text.substr(0, text.size() - 1);
  std::int64_t count = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
  if (error != std::errc() || end != digits.data() + digits.size() || count < 0 || count > kMaxSeconds / *unit) {
    return std::nullopt;
  }
  return std::chrono::seconds(count * *unit);
}

}  // namespace outboxd::daemon
