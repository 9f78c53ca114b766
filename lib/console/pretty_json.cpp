// A JSON text re-laid out token by token: no tree is built, so depth costs nothing but its indentation.
#include "console/pretty_json.hpp"

#include <algorithm>

namespace outboxd::console {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

std::string pretty_json(std::string_view json, std::size_t max_bytes) {
  std::string out;
  std::size_t depth = 0;
  const auto new_line = [&] {
    out += '\n';
    out.append(2 * std::min(depth, kMaxIndentDepth), ' ');
  };
  for (std::size_t i = 0; i < json.size() && out.size() < max_bytes; ++i) {
    const char c = json[i];
    switch (c) {
      case '"': {  // up to the closing quote, past escaped ones
        const std::size_t start = i++;
        while (i < json.size() && json[i] != '"') i += json[i] == '\\' ? 2 : 1;
        out.append(json.substr(start, std::min(i, json.size() - 1) - start + 1));
        break;
      }
      case '{':
      case '[': {
        std::size_t next = i + 1;
        while (next < json.size() && is_space(json[next])) ++next;
        out += c;
        if (next < json.size() && (json[next] == '}' || json[next] == ']')) {
          out += json[next];
          i = next;
        } else {
          ++depth;
          new_line();
        }
        break;
      }
      case '}':
      case ']':
        depth -= std::min<std::size_t>(depth, 1);
        new_line();
        out += c;
        break;
      case ',':
        out += ',';
        new_line();
        break;
      case ':':
        out += ": ";
        break;
      default:
        if (!is_space(c)) out += c;  // numbers, true, false, null
    }
  }
  return out;
}

}  // namespace outboxd::console
