// Encoders and decoders for values that travel to and from libpq as text.
#include "pg/text_codec.hpp"

#include <charconv>

namespace outboxd::pg {
namespace {

// Written in place into a buffer sized for the longest values, then cut to
// length: the ids of every claim and mark go through here, several per row.
template <class Int>
std::string join_integers(std::span<const Int> values) {
  constexpr std::size_t kMaxDigits = 20;  // an int64's, with its sign
  std::string out(2 + values.size() * (kMaxDigits + 1), '\0');
  char* at = out.data();
  char* const end = out.data() + out.size();
  *at++ = '{';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) *at++ = ',';
    at = std::to_chars(at, end, values[i]).ptr;
  }
  *at++ = '}';
  out.resize(static_cast<std::size_t>(at - out.data()));
  return out;
}

}  // namespace

std::string quote_ident(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out.push_back('"');
  for (const char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string int_array_literal(std::span<const int> values) { return join_integers(values); }
std::string int_array_literal(std::span<const std::int64_t> values) { return join_integers(values); }

std::string text_array_literal(std::span<const std::string> values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back('"');
    for (const char c : values[i]) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

std::string bool_array_literal(const std::vector<bool>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back(values[i] ? 't' : 'f');
  }
  out.push_back('}');
  return out;
}

std::optional<std::int64_t> parse_int64(std::string_view text) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty()) return std::nullopt;
  return value;
}

std::string one_line(std::string_view text) {
  std::string out;
  bool space = false;
  for (const char c : text) {
    if (c == '\n' || c == '\t' || c == '\r' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

std::optional<std::string> unless_empty(std::string_view text) {
  if (text.empty()) return std::nullopt;
  return std::string(text);
}

}  // namespace outboxd::pg
