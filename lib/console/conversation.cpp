// A conversation's rows, their events and receipts as one time-ordered list, and the console page that draws it.
#include "console/conversation.hpp"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "console/page_parts.hpp"

namespace outboxd::console {
namespace {

// Where a row was written to: its destination, its session, and its due time when it was scheduled.
std::string written_detail(const nlohmann::json& row) {
  std::string detail = "to " + text_of(field(row, "destination"));
  if (const auto session = text_of(field(row, "session_id")); !session.empty()) detail += ", session " + session;
  const auto due = text_of(field(row, "due_at"));
  if (!due.empty() && due > text_of(field(row, "created_at"))) detail += ", due " + instant(due);
  return detail;
}

// The entry kinds the stylesheet marks; an action of another name gets no mark.
std::string_view mark_of(std::string_view what) {
  for (std::string_view known : {"written", "dispatched", "received", "parked", "requeued", "skipped", "replayed",
                                 "cancelled", "fired", "rescheduled"}) {
    if (what == known) return known;
  }
  return "other";
}

std::string event_who(const nlohmann::json& event) {
  std::string who = text_of(field(event, "db_role"));
  if (const auto os_user = text_of(field(event, "os_user")); !os_user.empty()) who += " (" + os_user + ")";
  return who;
}

}  // namespace

std::string instant(std::string_view at) {
  if (at.size() < 19 || at[10] != 'T') return std::string(at);
  std::string shown = std::string(at.substr(0, 10)) + ' ' + std::string(at.substr(11, 8));
  std::string fraction = at.size() > 19 && at[19] == '.' ? std::string(at.substr(20, 3)) : std::string();
  fraction.erase(std::find_if(fraction.begin(), fraction.end(), [](char c) { return c < '0' || c > '9'; }),
                 fraction.end());
  fraction.resize(3, '0');
  return shown + '.' + fraction + 'Z';
}

std::vector<ConversationEntry> conversation_entries(const nlohmann::json& rows) {
  std::vector<ConversationEntry> entries;
  if (!rows.is_array()) return entries;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    entries.push_back({text_of(field(row, "created_at")), "written", i, text_of(field(row, "writer")),
                       written_detail(row)});
    for (const auto& event : field(row, "events")) {
      entries.push_back({text_of(field(event, "at")), text_of(field(event, "action")), i, event_who(event),
                         text_of(field(event, "detail"))});
    }
    if (const auto sent = text_of(field(row, "dispatched_at")); !sent.empty()) {
      const auto& failed = field(row, "attempts");
      const bool retried = failed.is_number() && failed.get<std::int64_t>() > 0;
      entries.push_back({sent, "dispatched", i, "", retried ? "after " + failed.dump() + " failed attempts" : ""});
    }
    for (const auto& receipt : field(row, "receipts")) {
      entries.push_back({text_of(field(receipt, "received_at")), "received", i, text_of(field(receipt, "consumer")),
                         "recorded by " + text_of(field(receipt, "writer"))});
    }
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const ConversationEntry& a, const ConversationEntry& b) { return a.at < b.at; });
  return entries;
}

std::string conversation_page(const Frame& frame, std::string_view correlation_id, const nlohmann::json& conversation) {
  const auto& rows = field(conversation, "rows");
  const std::string id(correlation_id);
  std::string content;
  if (!rows.is_array() || rows.empty()) {
    content = element("p", "problem", text("No row carries this correlation id (never written, or purged by retention).")).markup;
  } else {
    std::string items;
    for (const auto& entry : conversation_entries(rows)) {
      const auto& row = rows[entry.row];
      items += "<li class=\"" + std::string(mark_of(entry.what)) + "\"><time>" + escape(instant(entry.at), 64) + "</time> <b>" +
               escape(entry.what, 64) + "</b> " + row_link(frame.base, row).markup;
      if (!entry.detail.empty()) items += " <span class=\"count\">" + escape(entry.detail, 400) + "</span>";
      if (!entry.who.empty()) items += " <span class=\"who-did\">&#183; " + escape(entry.who, 300) + "</span>";
      items += "</li>";
    }
    const bool more = field(conversation, "more") == true;
    content = element("p", "count", text(std::to_string(rows.size()) + (more ? " newest rows" : " rows") +
                                         ", their events and inbox receipts, oldest first")).markup +
              "<ol class=\"timeline\">" + items + "</ol>";
    std::vector<std::vector<Html>> table_rows;
    for (const auto& r : rows) {
      table_rows.push_back({cell(field(r, "id")), row_link(frame.base, r), cell(field(r, "writer")),
                            cell(field(r, "state")), cell(field(r, "destination")), session_link(frame.base, r),
                            cell(field(r, "parent_message_id")), cell(field(r, "originating_message_id")),
                            text(std::to_string(field(r, "receipts").size()))});
    }
    content += "<h2>Rows</h2><div class=\"wide\">" +
               table({"id", "message id", "writer", "state", "destination", "session", "parent", "originating",
                      "receipts"}, table_rows).markup + "</div>";
    if (more) {
      const std::string older = frame.base + "/conversations/" + url_segment(id) + "?before=" + field(rows[0], "id").dump();
      content += "<p>" + link(older, "", "older rows").markup + "</p>";
    }
  }
  std::vector<std::vector<Html>> states;
  for (const auto& w : field(conversation, "workflow_states")) {
    states.push_back({cell(field(w, "id")), cell(field(w, "writer")), cell(field(w, "kind")), cell(field(w, "status")),
                      cell(field(w, "version")), cell(field(w, "timeout_message_id")), when(field(w, "timeout_due_at")),
                      when(field(w, "updated_at"))});
  }
  if (!states.empty()) {
    content += "<h2>Workflow state</h2><div class=\"wide\">" +
               table({"workflow", "writer", "kind", "status", "version", "timeout", "timeout due", "updated"}, states)
                   .markup + "</div>";
  }
  return framed(frame, "Conversation " + id, {content});
}

}  // namespace outboxd::console
