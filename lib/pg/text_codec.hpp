// Text-format values for libpq: quoted identifiers, array literals, integers.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace outboxd::pg {

// "name" with embedded quotes doubled: safe to splice into statement text.
// Always quotes, so the name keeps its case exactly as configured.
std::string quote_ident(std::string_view name);

// A bound parameter that is NULL when the text is empty: an optional filter not given.
std::optional<std::string> unless_empty(std::string_view text);

// Array literals for $n::int[] / $n::bigint[] parameters: {1,2,3}.
std::string int_array_literal(std::span<const int> values);
std::string int_array_literal(std::span<const std::int64_t> values);
// {"a","b \"c\""} for $n::text[]; every element quoted and escaped.
std::string text_array_literal(std::span<const std::string> values);
// {t,f} for $n::bool[].
std::string bool_array_literal(const std::vector<bool>& values);

// libpq's messages span lines with tab indents; logs want one line.
std::string one_line(std::string_view text);

// Base-10 integer, the whole text. Nullopt otherwise.
std::optional<std::int64_t> parse_int64(std::string_view text);

}  // namespace outboxd::pg
