// Escaping, URL segments and the small HTML pieces the console's pages are made of.
#include "console/html.hpp"

#include <algorithm>

#include "core/safe_text.hpp"

namespace outboxd::console {

namespace {

bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string escape_safe(std::string_view safe) {
  std::string out;
  out.reserve(safe.size() + safe.size() / 8);
  for (const char c : safe) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string escape(std::string_view text, std::size_t max_bytes) {
  return escape_safe(core::safe_text(text, max_bytes));
}

std::string escape_lines(std::string_view text, std::size_t max_bytes) {
  std::string out;
  std::size_t budget = max_bytes;
  while (budget > 64) {
    const std::size_t end = text.find('\n');
    const std::string line = core::safe_text(text.substr(0, end), budget);
    budget -= std::min(budget, line.size() + 1);
    out += escape_safe(line);
    if (end == std::string_view::npos) break;
    out += '\n';
    text.remove_prefix(end + 1);
  }
  return out;
}

std::string url_segment(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (unreserved(byte)) {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out;
}

std::optional<std::string> url_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hex_value(text[i + 1]);
    const int low = hex_value(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

Html text(std::string_view text, std::size_t max_bytes) { return {escape(text, max_bytes)}; }

Html concat(const std::vector<Html>& parts) {
  Html out;
  for (const Html& part : parts) out.markup += part.markup;
  return out;
}

Html link(std::string_view base, std::string_view id, std::string_view label) {
  return {"<a href=\"" + escape(std::string(base) + url_segment(id), 4096) + "\">" + escape(label) + "</a>"};
}

Html element(std::string_view tag, std::string_view css_class, const Html& content) {
  const std::string open(tag);
  const std::string attributes = css_class.empty() ? "" : " class=\"" + escape(css_class) + "\"";
  return {"<" + open + attributes + ">" + content.markup + "</" + open + ">"};
}

Html table(const std::vector<std::string>& headers, const std::vector<std::vector<Html>>& rows) {
  std::string out = "<table><thead><tr>";
  for (const std::string& header : headers) out += "<th>" + escape(header) + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const Html& cell : row) out += "<td>" + cell.markup + "</td>";
    out += "</tr>";
  }
  out += "</tbody></table>";
  return {out};
}

Html action_form(std::string_view action, std::string_view label, std::string_view csrf) {
  return {"<form method=\"post\" action=\"" + escape(action, 4096) + "\"><input type=\"hidden\" name=\"csrf\" value=\"" +
          escape(csrf) + "\"><button type=\"submit\">" + escape(label) + "</button></form>"};
}

Html action_form(std::string_view action, std::string_view label, std::string_view csrf, std::string_view name,
                 std::string_view value) {
  auto form = action_form(action, label, csrf);
  const std::string field = "<input type=\"hidden\" name=\"" + escape(name) + "\" value=\"" + escape(value) + "\">";
  form.markup.insert(form.markup.find("<button"), field);
  return form;
}

}  // namespace outboxd::console
