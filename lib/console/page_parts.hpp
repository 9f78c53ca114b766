// Pieces the console's pages share: the frame around them, JSON values as cells, times, counts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "console/html.hpp"
#include "console/pages.hpp"

namespace outboxd::console {

// The whole document: head with the stylesheet, navigation (with many
// outboxes: to the list of outboxes, and the outbox's name), who is logged in
// with a logout form, then `content`.
std::string framed(const Frame& frame, std::string_view title, const Html& content);

// A JSON value as a cell: a string's text, another value's JSON, "-" for null or missing.
Html cell(const nlohmann::json& value, std::size_t max_bytes = 200);
// A timestamptz as the views give it (UTC) to the second: "2026-12-01 13:20:05Z"; "-" for null.
Html when(const nlohmann::json& value);
// "N rows" and, when a limit cut them, how many matched.
Html count_line(std::size_t listed, std::int64_t matched, std::string_view noun);
// The value of `key` of an object, null when missing or `object` is not one.
const nlohmann::json& field(const nlohmann::json& object, const char* key);
// A string value's text; empty for null, a missing key or another type.
std::string text_of(const nlohmann::json& value);
// A row's writer (its "writer" field); empty for rows of no writer.
std::string writer_of(const nlohmann::json& row);
// The path of a row's page: <base>/rows/<message id>, with ?writer= when it
// has one, since a message id is its writer's own.
std::string row_path(std::string_view base, std::string_view message_id, std::string_view writer);
// A link to the row page of `row` (a row or an event with "message_id" and
// maybe "writer") labelled with its message id; a cell when it has none.
Html row_link(std::string_view base, const nlohmann::json& row);
// A link to the timeline of `row`'s session, labelled with its id; "-" when it has none.
Html session_link(std::string_view base, const nlohmann::json& row);
// A link to the conversation page of `row`'s correlation id, labelled with it; "-" when it has none.
Html conversation_link(std::string_view base, const nlohmann::json& row);

}  // namespace outboxd::console
