// CloudEvents attribute names, RFC 3339 time and URI-reference syntax, without any I/O.
#include "core/cloud_event.hpp"

#include <array>
#include <cstdio>
#include <ctime>

namespace outboxd::core {
namespace {

constexpr std::array<std::string_view, 9> kKeptPlain{"id",      "source", "specversion", "type", "time",
                                                     "subject", "datacontenttype", "data", "traceparent"};

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// unreserved, gen-delims and sub-delims of RFC 3986 (section 2).
bool is_uri_character(char c) {
  return is_alpha(c) || is_digit(c) || std::string_view("-._~:/?#[]@!$&'()*+,;=").find(c) != std::string_view::npos;
}

bool is_scheme(std::string_view text) {
  if (text.empty() || !is_alpha(text.front())) return false;
  for (const char c : text) {
    if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.') return false;
  }
  return true;
}

}  // namespace

bool is_extension_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxExtensionNameLength) return false;
  for (const char c : name) {
    if (!(c >= 'a' && c <= 'z') && !is_digit(c)) return false;
  }
  for (const auto kept : kKeptPlain) {
    if (name == kept) return false;
  }
  return true;
}

std::string rfc3339_utc(std::chrono::system_clock::time_point time) {
  const auto micros = std::chrono::floor<std::chrono::microseconds>(time).time_since_epoch();
  const auto seconds = std::chrono::floor<std::chrono::seconds>(micros);
  const std::time_t whole = static_cast<std::time_t>(seconds.count());
  std::tm utc{};
  gmtime_r(&whole, &utc);
  char text[96];  // room for any int the fields could hold, as the compiler checks
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<long long>((micros - seconds).count()));
  return text;
}

bool is_uri_reference(std::string_view text) {
  if (text.empty()) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      if (i + 2 >= text.size() || !is_hex(text[i + 1]) || !is_hex(text[i + 2])) return false;
      i += 2;
    } else if (!is_uri_character(text[i])) {
      return false;
    }
  }
  const auto colon = text.find(':');
  return colon == std::string_view::npos || colon > text.find_first_of("/?#") || is_scheme(text.substr(0, colon));
}

}  // namespace outboxd::core
