// JSON-lines log formatting: ts, level, msg; strings escaped per RFC 8259.
#include "log/json_formatter.hpp"

#include <chrono>
#include <ctime>

#include "core/safe_text.hpp"
#include "log/log.hpp"

namespace outboxd::log {

// Invalid UTF-8 would make the whole line invalid JSON: each such byte
// becomes U+FFFD. Characters that break or reorder lines for a reader (C1,
// U+2028, bidi overrides) are escaped like the C0 controls JSON requires.
void append_json_escaped(std::string_view text, spdlog::memory_buf_t& dest) {
  for (std::size_t at = 0; at < text.size();) {
    const core::Utf8Char d = core::decode_utf8(text.substr(at));
    const char32_t c = d.code_point;
    if (d.length == 0) {
      dest.append(std::string_view("\\ufffd"));
    } else if (c == '"') {
      dest.append(std::string_view("\\\""));
    } else if (c == '\\') {
      dest.append(std::string_view("\\\\"));
    } else if (c == '\n') {
      dest.append(std::string_view("\\n"));
    } else if (c == '\r') {
      dest.append(std::string_view("\\r"));
    } else if (c == '\t') {
      dest.append(std::string_view("\\t"));
    } else if (core::breaks_or_hides_lines(c)) {
      fmt::format_to(std::back_inserter(dest), "\\u{:04x}", static_cast<unsigned>(c));
    } else {
      dest.append(text.substr(at, d.length));
    }
    at += d.length == 0 ? 1 : d.length;
  }
}

void JsonFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const auto since_epoch = msg.time.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds);
  const std::time_t t = seconds.count();
  std::tm utc{};
  gmtime_r(&t, &utc);
  char stamp[32];
  const auto n = std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &utc);
  dest.append(std::string_view("{\"ts\":\""));
  dest.append(stamp, stamp + n);
  fmt::format_to(std::back_inserter(dest), ".{:03}Z\",\"level\":\"", millis.count());
  const auto level = spdlog::level::to_string_view(msg.level);
  dest.append(level.data(), level.data() + level.size());
  if (const auto& outbox = thread_outbox(); !outbox.empty()) {
    dest.append(std::string_view("\",\"outbox\":\""));
    append_json_escaped(outbox, dest);
  }
  dest.append(std::string_view("\",\"msg\":\""));
  append_json_escaped(std::string_view(msg.payload.data(), msg.payload.size()), dest);
  dest.append(std::string_view("\"}\n"));
}

std::unique_ptr<spdlog::formatter> JsonFormatter::clone() const {
  return std::make_unique<JsonFormatter>();
}

}  // namespace outboxd::log
