// HTML for the console without I/O: text is escaped on the way in, so a page is built only from safe pieces.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace outboxd::console {

// Markup made by the functions below only: holding one means every text in
// it was escaped.
struct Html {
  std::string markup;
};

// Text as HTML: & < > " ' escaped; invalid UTF-8, control characters, line
// separators and bidirectional overrides made harmless (core::safe_text); cut
// to `max_bytes`. For element content and attribute values alike.
std::string escape(std::string_view text, std::size_t max_bytes = 1024);
// Several lines (a body): as escape(), each line on its own, newlines kept.
std::string escape_lines(std::string_view text, std::size_t max_bytes);

// A path segment with every byte but A-Z a-z 0-9 - . _ ~ percent-encoded, so
// an id can be put in a URL whatever it holds.
std::string url_segment(std::string_view text);
// A percent-encoded segment or query value decoded ("+" stays "+"); nullopt when a "%" is not followed by two hex digits.
std::optional<std::string> url_decode(std::string_view text);

Html text(std::string_view text, std::size_t max_bytes = 1024);
Html concat(const std::vector<Html>& parts);
// <a href="/rows/<id>">label</a>: `base` is a literal path such as "/rows/", `id` is encoded.
Html link(std::string_view base, std::string_view id, std::string_view label);
// <tag class="...">content</tag> for a literal tag and class.
Html element(std::string_view tag, std::string_view css_class, const Html& content);
Html table(const std::vector<std::string>& headers, const std::vector<std::vector<Html>>& rows);
// A POST form of one button, carrying the session's CSRF token as the field `csrf`.
Html action_form(std::string_view action, std::string_view label, std::string_view csrf);
// The same with one more hidden field, `name` = `value`.
Html action_form(std::string_view action, std::string_view label, std::string_view csrf, std::string_view name,
                 std::string_view value);

}  // namespace outboxd::console
