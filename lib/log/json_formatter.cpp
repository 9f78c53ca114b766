// JSON-lines log formatting: ts, level, msg; strings escaped per RFC 8259.
#include "log/json_formatter.hpp"

#include <chrono>
#include <ctime>

namespace outboxd::log {

void append_json_escaped(std::string_view text, spdlog::memory_buf_t& dest) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': dest.append(std::string_view("\\\"")); break;
      case '\\': dest.append(std::string_view("\\\\")); break;
      case '\n': dest.append(std::string_view("\\n")); break;
      case '\r': dest.append(std::string_view("\\r")); break;
      case '\t': dest.append(std::string_view("\\t")); break;
      default:
        if (byte < 0x20) {
          const char escaped[] = {'\\', 'u', '0', '0', kHex[byte >> 4], kHex[byte & 0xF]};
          dest.append(escaped, escaped + sizeof(escaped));
        } else {
          dest.push_back(c);
        }
    }
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
  dest.append(std::string_view("\",\"msg\":\""));
  append_json_escaped(std::string_view(msg.payload.data(), msg.payload.size()), dest);
  dest.append(std::string_view("\"}\n"));
}

std::unique_ptr<spdlog::formatter> JsonFormatter::clone() const {
  return std::make_unique<JsonFormatter>();
}

}  // namespace outboxd::log
