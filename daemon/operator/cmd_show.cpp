// `outboxd show MESSAGE_ID`: one row's whole state and its audit trail.
#include <algorithm>
#include <array>
#include <cstdio>
#include <iostream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/safe_text.hpp"
#include "daemon/operator/operator_command.hpp"
#include "daemon/commands.hpp"
#include "daemon/operator_text.hpp"
#include "pg/operator_views.hpp"

namespace outboxd::daemon {
namespace {

// The order of 001_outbox.sql's table, grouped as an operator reads a row;
// columns added later print after these, by name.
constexpr std::array<std::string_view, 24> kColumnOrder{
    "id", "message_id", "status", "destination", "session_id", "correlation_id", "parent_message_id",
    "originating_message_id", "subject", "content_type", "headers", "ttl", "traceparent", "created_at", "due_at",
    "dispatched_at", "cancelled_at", "attempts", "first_failed_at", "last_failed_at", "next_attempt_at",
    "last_error", "partition", "writer"};

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

// The body as its size and its first bytes as text: control characters and
// invalid UTF-8 (a binary body) are replaced, so the preview cannot act on a terminal.
nlohmann::json with_body_preview(nlohmann::json row) {
  const auto size = row["body_bytes"].get<std::int64_t>();
  std::string preview = core::safe_text(from_hex(row["body_head"].get<std::string>()), 200);
  if (size > static_cast<std::int64_t>(row["body_head"].get<std::string>().size() / 2)) preview += "...";
  row.erase("body_head");
  row["body_preview"] = preview;
  return row;
}

bool is_time(std::string_view key) { return key.ends_with("_at"); }

void print_row(const nlohmann::json& row) {
  auto line = [&](std::string_view key) {
    const auto& value = row[std::string(key)];
    std::printf("%-24s %s\n", std::string(key).c_str(), (is_time(key) ? when(value) : cell(value, 400)).c_str());
  };
  for (const auto key : kColumnOrder) line(key);
  for (const auto& [key, value] : row.items()) {
    if (std::find(kColumnOrder.begin(), kColumnOrder.end(), key) == kColumnOrder.end() && !key.starts_with("body")) {
      line(key);
    }
  }
  std::printf("%-24s %s bytes: %s\n", "body", cell(row["body_bytes"]).c_str(), cell(row["body_preview"], 400).c_str());
}

void print_events(const std::vector<nlohmann::json>& events) {
  std::cout << "\nhistory (" << events.size() << (events.size() == 1 ? " event" : " events") << ")\n";
  std::vector<std::vector<std::string>> lines;
  for (const auto& e : events) {
    lines.push_back({when(e["at"]), cell(e["action"]), cell(e["db_role"]), cell(e["os_user"]), cell(e["detail"], 120)});
  }
  if (!lines.empty()) print_table({"at", "action", "database role", "os user", "detail"}, lines);
}

}  // namespace

int cmd_show(const ConfigChoice& choice, const std::string& message_id, const std::string& writer, bool json) {
  return run_operator_command(choice, "show", [&](OperatorCommand& s) {
    pg::OperatorViews views(s.connection, s.config.outbox.schema);
    auto history = views.show(message_id, writer);
    if (!history) return s.failed(history.error());
    const auto& h = history.value();
    if (!h.writers.empty()) {
      std::cerr << "show: message id " << cell(message_id, 200) << " names rows of " << h.writers.size()
                << " writers (" << cell(id_list(h.writers), 400) << "): name one with --writer\n";
      return kExitUsage;
    }
    const auto events = parsed(h.events);
    const nlohmann::json row = h.row ? with_body_preview(nlohmann::json::parse(*h.row)) : nlohmann::json();
    if (json) {
      print_json({{"row", row}, {"events", events}});
    } else if (h.row) {
      print_row(row);
      print_events(events);
    } else {
      std::cout << "show: no row has message id " << cell(message_id, 200)
                << " (never written, or purged by retention)\n";
      if (!events.empty()) print_events(events);
    }
    return h.row ? kExitOk : kExitFailure;
  });
}

}  // namespace outboxd::daemon
