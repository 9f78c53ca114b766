// `outboxd parked`: the rows that failed, why, since when, and how much of their session waits behind them.
#include <iostream>

#include <nlohmann/json.hpp>

#include "daemon/operator/operator_command.hpp"
#include "daemon/commands.hpp"
#include "daemon/operator/duration_text.hpp"
#include "daemon/operator_text.hpp"
#include "pg/operator_views.hpp"

namespace outboxd::daemon {
namespace {

std::vector<std::string> text_row(const nlohmann::json& r) {
  return {cell(r["message_id"]), cell(r["status"]), cell(r["destination"], 24), cell(r["session_id"], 24),
          cell(r["attempts"]), when(r["first_failed_at"]), when(r["last_failed_at"]), cell(r["waiting_behind"]),
          cell(r["last_error"], 80)};
}

void print_text(const std::vector<nlohmann::json>& rows, std::int64_t matched) {
  std::vector<std::vector<std::string>> lines;
  for (const auto& r : rows) lines.push_back(text_row(r));
  print_table({"message id", "status", "destination", "session", "attempts", "first failed", "last failed", "behind",
               "last error"},
              lines);
  print_count("row", rows.size(), matched);
}

std::optional<pg::ParkedFilter> filter_of(const ParkedOptions& options) {
  pg::ParkedFilter filter{options.retrying, options.destination, options.session_id, std::nullopt, options.limit};
  if (options.older_than.empty()) return filter;
  filter.older_than = parse_duration(options.older_than);
  if (!filter.older_than) return std::nullopt;
  return filter;
}

}  // namespace

int cmd_parked(const ConfigChoice& choice, const ParkedOptions& options) {
  const auto filter = filter_of(options);
  if (!filter) {
    std::cerr << "parked: --older-than takes a duration such as 90s, 10m, 2h or 7d, not \"" << options.older_than
              << "\"\n";
    return kExitUsage;
  }
  return run_operator_command(choice, "parked", [&](OperatorCommand& s) {
    pg::OperatorViews views(s.connection, s.config.outbox.schema);
    auto listed = views.parked(*filter);
    if (!listed) return s.failed(listed.error());
    const auto rows = parsed(listed.value().rows);
    const auto matched = listed.value().matched;
    if (options.json) {
      print_json({{"rows", rows},
                  {"matched", matched},
                  {"limit", options.limit},
                  {"more", matched > static_cast<std::int64_t>(rows.size())}});
    } else {
      print_text(rows, matched);
    }
    return kExitOk;
  });
}

}  // namespace outboxd::daemon
