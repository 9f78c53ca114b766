// `outboxd timeline SESSION`: every row of a session in id order, with its lineage and the workflow state behind it.
#include <iostream>

#include <nlohmann/json.hpp>

#include "daemon/operator/operator_command.hpp"
#include "daemon/commands.hpp"
#include "daemon/operator_text.hpp"
#include "pg/operator_views.hpp"

namespace outboxd::daemon {
namespace {

// When it left the outbox: dispatched, cancelled (or skipped), or "-" while it waits.
std::string done_at(const nlohmann::json& r) {
  return when(r["dispatched_at"].is_null() ? r["cancelled_at"] : r["dispatched_at"]);
}

void print_rows(const std::vector<nlohmann::json>& rows, std::int64_t matched) {
  std::vector<std::vector<std::string>> lines;
  for (const auto& r : rows) {
    lines.push_back({cell(r["id"]), cell(r["message_id"]), cell(r["state"]), cell(r["destination"], 24),
                     cell(r["subject"], 24), when(r["created_at"]), when(r["due_at"]), done_at(r),
                     cell(r["parent_message_id"]), cell(r["originating_message_id"]), cell(r["last_error"], 60)});
  }
  print_table({"id", "message id", "state", "destination", "subject", "created", "due", "sent/cancelled", "parent",
               "originating", "last error"},
              lines);
  print_count("row", rows.size(), matched);
}

void print_workflows(const std::vector<nlohmann::json>& states) {
  if (states.empty()) return;
  std::cout << "\nworkflow state\n";
  std::vector<std::vector<std::string>> lines;
  for (const auto& w : states) {
    lines.push_back({cell(w["id"]), cell(w["kind"]), cell(w["status"]), cell(w["version"]), cell(w["correlation_id"]),
                     cell(w["timeout_message_id"]), when(w["timeout_due_at"]), when(w["updated_at"])});
  }
  print_table({"workflow", "kind", "status", "version", "correlation", "timeout", "timeout due", "updated"}, lines);
}

}  // namespace

int cmd_timeline(const ConfigChoice& choice, const std::string& session_id, int limit, bool json) {
  return run_operator_command(choice, "timeline", [&](OperatorCommand& s) {
    pg::OperatorViews views(s.connection, s.config.outbox.schema);
    auto timeline = views.timeline(session_id, limit);
    if (!timeline) return s.failed(timeline.error());
    const auto rows = parsed(timeline.value().rows.rows);
    const auto states = parsed(timeline.value().workflow_states);
    const auto matched = timeline.value().rows.matched;
    if (json) {
      print_json({{"session_id", session_id},
                  {"rows", rows},
                  {"matched", matched},
                  {"limit", limit},
                  {"workflow_states", states}});
    } else {
      std::cout << "session " << cell(session_id, 200) << '\n';
      print_rows(rows, matched);
      print_workflows(states);
    }
    return rows.empty() && states.empty() ? kExitFailure : kExitOk;
  });
}

}  // namespace outboxd::daemon
