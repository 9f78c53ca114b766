// Text from outside the daemon (broker error descriptions, row fields) made fit for a log line and a text column.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace outboxd::core {

// Room for any sensible error description; a longer one is cut.
inline constexpr std::size_t kSafeTextMaxBytes = 1024;

// `text` as valid UTF-8 of at most `max_bytes` bytes with nothing that can
// forge or hide log lines:
// - each byte that is not part of a valid UTF-8 sequence (stray continuation
//   bytes, overlong forms, surrogates, code points past U+10FFFF, a truncated
//   sequence) becomes U+FFFD;
// - control characters (C0 including tab and newline, DEL, C1), the line and
//   paragraph separators U+2028/U+2029 and the bidirectional overrides and
//   isolates (U+202A..U+202E, U+2066..U+2069) each become a space;
// - past `max_bytes`, the text is cut at a character boundary and ends in
//   "... [N bytes cut]", the whole still within `max_bytes` (max_bytes should
//   be at least 64).
std::string safe_text(std::string_view text, std::size_t max_bytes = kSafeTextMaxBytes);

// `text` for one line of the human log, every byte still recoverable: the
// characters safe_text replaces are escaped instead, "\n", "\t", "\r",
// "\x1b" (other C0 and DEL alike), "\u0085", "\u202e", and each byte of
// invalid UTF-8 as "\xff". Backslashes are left alone.
std::string escaped_for_log(std::string_view text);

// The valid UTF-8 sequence at the start of `text`: its length and code point;
// length 0 when the first byte starts none (or `text` is empty).
struct Utf8Char {
  std::size_t length = 0;
  char32_t code_point = 0;
};
Utf8Char decode_utf8(std::string_view text);

// C0 and C1 controls, DEL, U+2028/U+2029 and the bidirectional overrides and
// isolates: what lets a text forge a line or make it read differently.
bool breaks_or_hides_lines(char32_t code_point);

}  // namespace outboxd::core
