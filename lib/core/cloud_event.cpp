// CloudEvents attribute names, RFC 3339 time and URI-reference syntax, without any I/O.
#include "core/cloud_event.hpp"

#include <array>

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

// `value` with leading zeros to `width` digits, then `separator`.
void append_padded(std::string& out, long long value, std::size_t width, char separator) {
  const std::string digits = std::to_string(value);
  out.append(digits.size() < width ? width - digits.size() : 0, '0');
  out += digits;
  out += separator;
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
  using namespace std::chrono;
  const auto micros = floor<microseconds>(time);
  const auto day = floor<days>(micros);
  const year_month_day date{day};
  const hh_mm_ss clock{micros - day};
  std::string out;
  append_padded(out, static_cast<int>(date.year()), 4, '-');
  append_padded(out, static_cast<unsigned>(date.month()), 2, '-');
  append_padded(out, static_cast<unsigned>(date.day()), 2, 'T');
  append_padded(out, clock.hours().count(), 2, ':');
  append_padded(out, clock.minutes().count(), 2, ':');
  append_padded(out, clock.seconds().count(), 2, '.');
  append_padded(out, clock.subseconds().count(), 6, 'Z');
  return out;
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
