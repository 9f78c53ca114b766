// "Did you mean ...?" for misspelt keys: edit distance and the closest candidate (internal).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace outboxd::config {

// Insertions, deletions, substitutions and swaps of neighbours each cost one.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, if it is near enough to be a typo of it
// (one edit for short words, two for most, three for long ones); the first
// such candidate wins a tie.
std::optional<std::string> closest_match(std::string_view word, std::span<const std::string> candidates);

}  // namespace outboxd::config
