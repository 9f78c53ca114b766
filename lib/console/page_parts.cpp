// The frame of every console page and the cells its tables are made of.
#include "console/page_parts.hpp"

namespace outboxd::console {

std::string framed(const Frame& frame, std::string_view title, const Html& content) {
  const std::string base = escape(frame.base, 4096);
  const std::string of_outbox = frame.outbox.empty() ? "" : " - " + escape(frame.outbox);
  std::string out =
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>" + escape(title) + of_outbox +
      " - outboxd console</title><link rel=\"stylesheet\" href=\"/console.css\"></head><body><header><nav>";
  if (!frame.outbox.empty()) {
    out += "<a href=\"/\">All outboxes</a> <span class=\"outbox\">outbox " + escape(frame.outbox) + "</span> ";
  }
  out += "<a href=\"" + base + "/\">Overview</a> <a href=\"" + base + "/parked\">Parked</a> <a href=\"" + base +
         "/audit\">Audit</a></nav>";
  if (!frame.operator_name.empty()) {
    out += "<span class=\"who\">" + escape(frame.operator_name) + "</span>" +
           action_form("/logout", "Log out", frame.csrf).markup;
  }
  out += "</header><main><h1>" + escape(title) + "</h1>" + content.markup + "</main></body></html>";
  return out;
}

const nlohmann::json& field(const nlohmann::json& object, const char* key) {
  static const nlohmann::json kNull;
  if (!object.is_object()) return kNull;
  const auto found = object.find(key);
  return found == object.end() ? kNull : *found;
}

std::string text_of(const nlohmann::json& value) { return value.is_string() ? value.get<std::string>() : std::string(); }

std::string writer_of(const nlohmann::json& row) { return text_of(field(row, "writer")); }

std::string row_path(std::string_view base, std::string_view message_id, std::string_view writer) {
  std::string path = std::string(base) + "/rows/" + url_segment(message_id);
  if (!writer.empty()) path += "?writer=" + url_segment(writer);
  return path;
}

Html row_link(std::string_view base, const nlohmann::json& row) {
  const auto& id = field(row, "message_id");
  if (!id.is_string()) return cell(id);
  return link(row_path(base, id.get<std::string>(), writer_of(row)), "", id.get<std::string>());
}

Html session_link(std::string_view base, const nlohmann::json& row) {
  const std::string session = text_of(field(row, "session_id"));
  if (session.empty()) return {"-"};
  return link(std::string(base) + "/sessions/", session, session);
}

Html conversation_link(std::string_view base, const nlohmann::json& row) {
  const auto& id = field(row, "correlation_id");
  if (!id.is_string()) return {"-"};
  return link(std::string(base) + "/conversations/", id.get<std::string>(), id.get<std::string>());
}

Html cell(const nlohmann::json& value, std::size_t max_bytes) {
  if (value.is_null()) return {"-"};
  if (value.is_string()) return text(value.get<std::string>(), max_bytes);
  return text(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), max_bytes);
}

Html when(const nlohmann::json& value) {
  if (!value.is_string()) return cell(value);
  std::string time = value.get<std::string>();
  if (time.size() >= 19 && time[10] == 'T') time = time.substr(0, 10) + " " + time.substr(11, 8) + "Z";
  return text(time, 64);
}

Html count_line(std::size_t listed, std::int64_t matched, std::string_view noun) {
  std::string line = std::to_string(listed) + " " + std::string(noun) + (listed == 1 ? "" : "s");
  if (matched > static_cast<std::int64_t>(listed)) line += " of " + std::to_string(matched);
  return element("p", "count", text(line));
}

}  // namespace outboxd::console
