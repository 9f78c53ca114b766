// The row and session pages of the console, and a body shown as JSON, text or hex, never as markup.
#include <cstdio>
#include <set>
#include <string>

#include "console/page_parts.hpp"
#include "console/pages.hpp"
#include "console/pretty_json.hpp"

namespace outboxd::console {

namespace {

constexpr std::size_t kShownBodyBytes = 256 * 1024;  // of escaped text; the console reads at most 64 KiB of a body

// Valid UTF-8 whose only control characters are newlines, carriage returns and tabs.
bool is_plain_text(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7f) return false;
      ++i;
      continue;
    }
    const std::size_t length = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (length == 0 || i + length > bytes.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(bytes[i + k]) & 0xc0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

std::string hex_dump(std::string_view bytes) {
  std::string out;
  char line[96];
  for (std::size_t offset = 0; offset < bytes.size(); offset += 16) {
    std::snprintf(line, sizeof line, "%08zx ", offset);
    out += line;
    std::string printable;
    for (std::size_t k = offset; k < offset + 16; ++k) {
      if (k < bytes.size()) {
        const auto c = static_cast<unsigned char>(bytes[k]);
        std::snprintf(line, sizeof line, " %02x", c);
        out += line;
        printable += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '.';
      } else {
        out += "   ";
      }
    }
    out += "  " + printable + "\n";
  }
  return out;
}

Html events_table(const std::vector<nlohmann::json>& events) {
  std::vector<std::vector<Html>> rows;
  for (const auto& e : events) {
    rows.push_back({when(field(e, "at")), cell(field(e, "action")), cell(field(e, "db_role")),
                    cell(field(e, "os_user")), cell(field(e, "detail"), 400)});
  }
  return table({"at", "action", "database role", "operator", "detail"}, rows);
}

}  // namespace

Html body_html(const BodyView& body) {
  std::string kind;
  std::string shown;
  const auto first = body.bytes.find_first_not_of(" \t\r\n");
  const bool container = first != std::string::npos && (body.bytes[first] == '{' || body.bytes[first] == '[');
  if (container && nlohmann::json::accept(body.bytes)) {
    kind = "JSON";
    shown = pretty_json(body.bytes, kShownBodyBytes);
  } else if (is_plain_text(body.bytes)) {
    kind = "text";
    shown = body.bytes;
  } else {
    kind = "bytes";
    shown = hex_dump(body.bytes);
  }
  std::string caption = std::to_string(body.size) + " bytes, shown as " + kind;
  if (static_cast<std::int64_t>(body.bytes.size()) < body.size) {
    caption += " (the first " + std::to_string(body.bytes.size()) + ")";
  }
  return concat({element("p", "count", text(caption)),
                 Html{"<pre>" + escape_lines(shown, kShownBodyBytes) + "</pre>"}});
}

std::string row_page(const Frame& frame, std::string_view message_id, const nlohmann::json& row,
                     const std::vector<nlohmann::json>& events, const BodyView& body) {
  std::string content;
  if (row.is_null()) {
    content = element("p", "problem", text("No row has this message id (never written, or purged by retention).")).markup;
  } else {
    std::vector<std::vector<Html>> fields;
    for (const auto& [key, value] : row.items()) {
      if (key.starts_with("body")) continue;
      fields.push_back({text(key), key.ends_with("_at") ? when(value) : cell(value, 2000)});
    }
    const auto& session = field(row, "session_id");
    if (session.is_string()) {
      fields.push_back({text("timeline"), link(frame.base + "/sessions/", session.get<std::string>(), "the session's timeline")});
    }
    if (field(row, "correlation_id").is_string()) {
      fields.push_back({text("conversation"), conversation_link(frame.base, row)});
    }
    if (field(row, "status") == "parked") {
      const std::string path = frame.base + "/parked/" + url_segment(message_id);
      const std::string whose = writer_of(row);
      fields.push_back({text("actions"), concat({action_form(path + "/requeue", "requeue", frame.csrf, "writer", whose),
                                                 action_form(path + "/skip", "skip", frame.csrf, "writer", whose)})});
    }
    content = table({"column", "value"}, fields).markup + "<h2>Body</h2>" + body_html(body).markup;
  }
  content += "<h2>History</h2>" + events_table(events).markup;
  return framed(frame, "Row " + std::string(message_id), {content});
}

std::string writers_page(const Frame& frame, std::string_view message_id, const std::vector<std::string>& writers) {
  std::vector<std::vector<Html>> rows;
  for (const auto& writer : writers) {
    rows.push_back({link(row_path(frame.base, message_id, writer), "", writer.empty() ? "(no writer)" : writer)});
  }
  const Html content = concat({element("p", "problem", text("Rows of more than one writer have this message id: "
                                                            "each writer's ids are its own. Choose the writer.")),
                               table({"writer"}, rows)});
  return framed(frame, "Row " + std::string(message_id), content);
}

std::string session_page(const Frame& frame, std::string_view session_id, const nlohmann::json& timeline) {
  std::vector<std::vector<Html>> rows;
  std::size_t listed = 0;
  for (const auto& r : field(timeline, "rows")) {
    ++listed;
    const auto& done = field(r, "dispatched_at").is_null() ? field(r, "cancelled_at") : field(r, "dispatched_at");
    rows.push_back({cell(field(r, "id")), row_link(frame.base, r),
                    cell(field(r, "writer")), cell(field(r, "state")), cell(field(r, "destination")),
                    cell(field(r, "subject")),
                    when(field(r, "created_at")), when(field(r, "due_at")), when(done), cell(field(r, "attempts")),
                    cell(field(r, "last_error"), 400)});
  }
  const auto& matched = field(timeline, "matched");
  std::string content =
      count_line(listed, matched.is_number() ? matched.get<std::int64_t>() : 0, "row").markup +
      table({"id", "message id", "writer", "state", "destination", "subject", "created", "due", "sent/cancelled",
             "attempts", "last error"},
            rows)
          .markup;
  // A session is its writer's: each writer's parked rows get forms of their own.
  std::set<std::string> parked_writers;
  for (const auto& r : field(timeline, "rows")) {
    if (field(r, "state") != "parked") continue;
    const auto& writer = field(r, "writer");
    parked_writers.insert(writer.is_string() ? writer.get<std::string>() : "");
  }
  const std::string path = frame.base + "/sessions/" + url_segment(session_id);
  for (const auto& writer : parked_writers) {
    const std::string rows_of = writer.empty() ? "the parked rows without writer" : writer + "'s parked rows";
    content += "<p>" + action_form(path + "/requeue", "requeue " + rows_of, frame.csrf, "writer", writer).markup +
               action_form(path + "/skip", "skip " + rows_of, frame.csrf, "writer", writer).markup + "</p>";
  }
  std::vector<std::vector<Html>> states;
  for (const auto& w : field(timeline, "workflow_states")) {
    states.push_back({cell(field(w, "id")), cell(field(w, "kind")), cell(field(w, "status")), cell(field(w, "version")),
                      cell(field(w, "timeout_message_id")), when(field(w, "timeout_due_at")),
                      when(field(w, "updated_at"))});
  }
  if (!states.empty()) {
    content += "<h2>Workflow state</h2>" +
               table({"workflow", "kind", "status", "version", "timeout", "timeout due", "updated"}, states).markup;
  }
  return framed(frame, "Session " + std::string(session_id), {content});
}

}  // namespace outboxd::console
