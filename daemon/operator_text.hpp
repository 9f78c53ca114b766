// How the operator commands print rows for people: safe cells, short UTC times, aligned tables, bounded id lists.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "core/safe_text.hpp"
#include "pg/operator_views.hpp"
#include "pg/outbox_store.hpp"

namespace outboxd::daemon {

// Text from a row, a broker, the database or the config as one harmless line
// of at most `width` bytes: control characters, line separators, bidirectional
// overrides and invalid UTF-8 made harmless (core::safe_text), cut with "..."
// when too long. Every command prints such text through this function alone.
std::string shown(std::string_view text, std::size_t width = 40);
// A JSON value as shown(): "-" for null or a missing key, a number or an object as its JSON text.
std::string cell(const nlohmann::json& value, std::size_t width = 40);
// A timestamptz as JSON gives it (TimeZone UTC) to the second, with its era:
// "2026-12-01T13:20:05.123456+00:00" as "2026-12-01 13:20:05Z",
// "4713-11-24T00:00:00+00:00 BC" as "4713-11-24 00:00:00Z BC"; a year past
// 9999 keeps all its digits; "-" for null, "infinity" as it is.
std::string when(const nlohmann::json& value);

// `document` on stdout for scripts (--json): every character outside ASCII
// written as a JSON \u escape of its code point (U+202E or a C1 control
// reaches no terminal raw, and a JSON parser reads it back unchanged),
// invalid UTF-8 as U+FFFD.
void print_json(const nlohmann::json& document);

// Columns padded to their widest cell, two spaces apart; the last one is not padded.
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

// "N rows", and when the limit cut them, how many more there are and the option that shows them.
void print_count(const char* noun, std::size_t listed, std::int64_t matched);

// At most ten ids, each as shown(), then "and N more": for log lines and summaries.
std::string id_list(const std::vector<std::string>& ids);

// `outboxd status --json` and the console's: {"total": {...}, "destinations": {name: {...}}}.
nlohmann::json status_json(const pg::StatusReport& report);

// destinations: as `outboxd status --json` and the console give it: [{destination, priority, max_rate, burst
// (the burst in effect; 0 without max_rate), max_in_flight (0: none)}], in the file's order.
nlohmann::json policy_json(const std::vector<config::DestinationEntry>& destinations);

// A conversation as `timeline --correlation --json` and /api/conversations/ give it: the correlation id, its
// rows (oldest first), "more" and "older_before" (the --before of the next page back), the limit, and its
// workflow state records.
nlohmann::json conversation_json(const std::string& correlation_id, const pg::Conversation& conversation, int limit);

// Parses every document of a listing.
std::vector<nlohmann::json> parsed(const std::vector<std::string>& documents);

}  // namespace outboxd::daemon
