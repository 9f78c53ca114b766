// A conversation (every row one correlation id produced) as one timeline: for `outboxd timeline --correlation` and the console.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "console/pages.hpp"

namespace outboxd::console {

// One thing that happened to a row of the conversation.
struct ConversationEntry {
  std::string at;      // a timestamptz as the views give it (UTC, ISO 8601)
  std::string what;    // written, dispatched, an event's action (parked, requeued, fired...), received
  std::size_t row = 0; // the row's index in the conversation's "rows"
  std::string who;     // the writer, the event's role (and OS user), the consumer
  std::string detail;  // where it went or was due, the event's detail
};

// The entries of `rows` (pg::OperatorViews::conversation's rows, parsed), in
// time order; entries at the same time keep the order of their rows, and of
// a row's life: written, events, dispatched, received. Times in UTC ISO 8601,
// as PostgreSQL writes them under TimeZone UTC, order as their text does.
std::vector<ConversationEntry> conversation_entries(const nlohmann::json& rows);

// A timestamptz as the views give it (UTC, ISO 8601) to the millisecond, as
// the timeline shows it: "2026-12-07 08:52:04.120Z"; other text as it is.
std::string instant(std::string_view at);

// The console's /conversations/<correlation id>: the timeline drawn as a
// list (no script), the rows with their lineage and links to each row's and
// session's page, and the workflow state records. `conversation` holds
// "rows", "more" and "workflow_states".
std::string conversation_page(const Frame& frame, std::string_view correlation_id, const nlohmann::json& conversation);

}  // namespace outboxd::console
