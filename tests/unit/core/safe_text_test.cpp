// Unit tests of safe_text: UTF-8 repair, control characters, the byte cap.
#include <catch2/catch.hpp>

#include "core/safe_text.hpp"

using outboxd::core::kSafeTextMaxBytes;
using outboxd::core::safe_text;

namespace {

// A strict check of the output, independent of the code under test.
bool valid_utf8(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t length =
        lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

}  // namespace

TEST_CASE("Clean text passes unchanged", "[core][safe_text]") {
  CHECK(safe_text("") == "");
  CHECK(safe_text("amqp:precondition-failed: queue full") == "amqp:precondition-failed: queue full");
  CHECK(safe_text("Zürich → 東京 🚀") == "Zürich → 東京 🚀");
}

TEST_CASE("Invalid UTF-8 becomes U+FFFD, byte by byte", "[core][safe_text]") {
  CHECK(safe_text("a\xFF" "b") == "a\xEF\xBF\xBD" "b");
  CHECK(safe_text("\x80") == "\xEF\xBF\xBD");                                 // stray continuation
  CHECK(safe_text("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");                 // overlong "/"
  CHECK(safe_text("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  CHECK(safe_text("\xF4\x90\x80\x80").size() == 12);                          // past U+10FFFF
  CHECK(safe_text("end\xE2\x82") == "end\xEF\xBF\xBD\xEF\xBF\xBD");           // truncated sequence
}

TEST_CASE("Control characters, separators and bidi overrides become spaces", "[core][safe_text]") {
  CHECK(safe_text("line1\nFAKE LOG LINE\r\n") == "line1 FAKE LOG LINE  ");
  CHECK(safe_text("\x1B[31mred\x1B[0m\t\x7F") == " [31mred [0m  ");
  CHECK(safe_text("c1:\xC2\x85.") == "c1: .");                       // U+0085 NEL
  CHECK(safe_text("a\xE2\x80\xA8" "b") == "a b");                    // U+2028
  CHECK(safe_text("user\xE2\x80\xAEtxt.exe") == "user txt.exe");     // U+202E
  CHECK(safe_text("x\xE2\x81\xA6y") == "x y");                       // U+2066
}

TEST_CASE("Long text is cut at a character boundary and says how much was cut", "[core][safe_text]") {
  const std::string exact(kSafeTextMaxBytes, 'a');
  CHECK(safe_text(exact) == exact);

  const std::string long_text(1 << 20, 'b');
  const std::string cut = safe_text(long_text);
  CHECK(cut.size() <= kSafeTextMaxBytes);
  CHECK(cut.size() > kSafeTextMaxBytes - 32);
  const std::size_t kept = cut.find(' ');
  CHECK(cut.substr(kept) == " ... [" + std::to_string((1 << 20) - kept) + " bytes cut]");

  // Three-byte characters are never split, and invalid input is still repaired.
  std::string mixed;
  for (int i = 0; i < 2000; ++i) mixed += i % 7 == 0 ? "\xFF" : "€";
  const std::string bounded = safe_text(mixed, 100);
  CHECK(bounded.size() <= 100);
  CHECK(valid_utf8(bounded));
  CHECK(bounded.find(" bytes cut]") != std::string::npos);
}

TEST_CASE("Log escaping keeps every byte recoverable", "[core][safe_text]") {
  using outboxd::core::escaped_for_log;
  CHECK(escaped_for_log("plain Zürich 東京 \\ path") == "plain Zürich 東京 \\ path");
  CHECK(escaped_for_log("a\nb\r\tc\x1b[0m\x7F") == "a\\nb\\r\\tc\\x1b[0m\\x7f");
  CHECK(escaped_for_log("bad \xFF\xC0\xAF end\xE2\x82") == "bad \\xff\\xc0\\xaf end\\xe2\\x82");
  CHECK(escaped_for_log("\xC2\x85|\xE2\x80\xA8|\xE2\x80\xAE|\xE2\x81\xA9") == "\\u0085|\\u2028|\\u202e|\\u2069");
}
