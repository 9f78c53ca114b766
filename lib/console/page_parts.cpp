// The frame of every console page and the cells its tables are made of.
#include "console/page_parts.hpp"

namespace outboxd::console {

std::string framed(const Frame& frame, std::string_view title, const Html& content) {
  std::string out =
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape(title) +
      " - outboxd console</title><link rel=\"stylesheet\" href=\"/console.css\"></head><body><header><nav>"
      "<a href=\"/\">Overview</a> <a href=\"/parked\">Parked</a> <a href=\"/audit\">Audit</a></nav>";
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

std::string writer_of(const nlohmann::json& row) {
  const auto& writer = field(row, "writer");
  return writer.is_string() ? writer.get<std::string>() : "";
}

std::string row_path(std::string_view message_id, std::string_view writer) {
  std::string path = "/rows/" + url_segment(message_id);
  if (!writer.empty()) path += "?writer=" + url_segment(writer);
  return path;
}

Html row_link(const nlohmann::json& row) {
  const auto& id = field(row, "message_id");
  if (!id.is_string()) return cell(id);
  return link(row_path(id.get<std::string>(), writer_of(row)), "", id.get<std::string>());
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
