// UTF-8 validation, control-character replacement and a byte cap for foreign text.
#include "core/safe_text.hpp"

#include <algorithm>
#include <cstdint>

namespace outboxd::core {

Utf8Char decode_utf8(std::string_view text) {
  if (text.empty()) return {};
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(0);
  if (lead < 0x80) return {1, lead};
  std::size_t length = 0;
  char32_t value = 0;
  char32_t minimum = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, value = lead & 0x1F, minimum = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, value = lead & 0x0F, minimum = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, value = lead & 0x07, minimum = 0x10000;
  } else {
    return {};
  }
  if (text.size() < length) return {};
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return {};
    value = (value << 6) | (byte(i) & 0x3F);
  }
  if (value < minimum || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return {};
  return {length, value};
}

bool breaks_or_hides_lines(char32_t c) {
  return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x2028 || c == 0x2029 || (c >= 0x202A && c <= 0x202E) ||
         (c >= 0x2066 && c <= 0x2069);
}

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The cleaned text of as much of `text` as fits in `budget` bytes; `consumed`
// says how many input bytes that was.
std::string clean_prefix(std::string_view text, std::size_t budget, std::size_t& consumed) {
  std::string out;
  out.reserve(std::min(text.size(), budget));
  consumed = 0;
  while (consumed < text.size()) {
    const Utf8Char d = decode_utf8(text.substr(consumed));
    std::string_view piece = d.length == 0 ? kReplacement : text.substr(consumed, d.length);
    if (d.length != 0 && breaks_or_hides_lines(d.code_point)) piece = " ";
    if (out.size() + piece.size() > budget) break;
    out += piece;
    consumed += d.length == 0 ? 1 : d.length;
  }
  return out;
}

std::string cut_note(std::size_t bytes) { return " ... [" + std::to_string(bytes) + " bytes cut]"; }

}  // namespace

std::string safe_text(std::string_view text, std::size_t max_bytes) {
  std::size_t consumed = 0;
  std::string whole = clean_prefix(text, max_bytes, consumed);
  if (consumed == text.size()) return whole;
  // The note for the whole input is at least as long as the one needed.
  const std::size_t room = cut_note(text.size()).size();
  std::string kept = clean_prefix(text, max_bytes > room ? max_bytes - room : 0, consumed);
  return kept + cut_note(text.size() - consumed);
}

std::string escaped_for_log(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const Utf8Char d = decode_utf8(text.substr(at));
    const auto byte = static_cast<std::uint8_t>(text[at]);
    if (d.length != 0 && !breaks_or_hides_lines(d.code_point)) {
      out.append(text.substr(at, d.length));
    } else if (d.code_point == '\n' && d.length == 1) {
      out += "\\n";
    } else if (d.code_point == '\t' && d.length == 1) {
      out += "\\t";
    } else if (d.code_point == '\r' && d.length == 1) {
      out += "\\r";
    } else if (d.length > 1) {
      const auto c = static_cast<unsigned>(d.code_point);
      out += {'\\', 'u', kHex[(c >> 12) & 0xF], kHex[(c >> 8) & 0xF], kHex[(c >> 4) & 0xF], kHex[c & 0xF]};
    } else {
      out += {'\\', 'x', kHex[byte >> 4], kHex[byte & 0xF]};
    }
    at += d.length == 0 ? 1 : d.length;
  }
  return out;
}

}  // namespace outboxd::core
