// How the operator commands print rows for people: safe cells, short UTC times, aligned tables, bounded id lists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace outboxd::daemon {

// A JSON value as one line of at most `width` characters: "-" for null or a
// missing key, text with control characters and invalid UTF-8 made harmless
// (rows hold what writers and brokers wrote), cut with "..." when too long.
std::string cell(const nlohmann::json& value, std::size_t width = 40);
// "2026-12-01T13:20:05.123456+00:00" (TimeZone UTC) as "2026-12-01 13:20:05Z"; "-" for null.
std::string when(const nlohmann::json& value);

// Columns padded to their widest cell, two spaces apart; the last one is not padded.
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

// "N rows", and when the limit cut them, how many more there are and the option that shows them.
void print_count(const char* noun, std::size_t shown, std::int64_t matched);

// At most ten ids, then "and N more": for log lines.
std::string id_list(const std::vector<std::string>& ids);

// Parses every document of a listing.
std::vector<nlohmann::json> parsed(const std::vector<std::string>& documents);

}  // namespace outboxd::daemon
