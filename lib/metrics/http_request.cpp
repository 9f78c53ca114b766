// Strict parsing of request heads and writing of responses for the HTTP endpoint.
#include "metrics/http_request.hpp"

#include <algorithm>
#include <cctype>

namespace outboxd::metrics {

namespace {

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view text) { return !text.empty() && std::all_of(text.begin(), text.end(), is_token_char); }

bool has_control_or_space(std::string_view text) {
  return std::any_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; });
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The next line of `rest` without its "\r\n" or "\n"; consumes it.
std::string_view next_line(std::string_view& rest) {
  const std::size_t lf = rest.find('\n');
  std::string_view line = rest.substr(0, lf);
  rest.remove_prefix(lf == std::string_view::npos ? rest.size() : lf + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

core::Error malformed(const std::string& what) { return core::rejected_error("malformed request: " + what); }

// "METHOD SP target SP HTTP/1.x", nothing more.
core::Result<RequestHead> parse_request_line(std::string_view line) {
  const std::size_t first = line.find(' ');
  const std::size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  if (second == std::string_view::npos) return malformed("request line");
  const std::string_view method = line.substr(0, first);
  const std::string_view target = line.substr(first + 1, second - first - 1);
  const std::string_view version = line.substr(second + 1);
  if (!is_token(method) || target.empty() || has_control_or_space(target)) return malformed("request line");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return malformed("version");
  return RequestHead{std::string(method), std::string(target.substr(0, target.find('?'))), false};
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
  }
}

}  // namespace

std::size_t request_head_end(std::string_view received) {
  const std::size_t crlf = received.find("\r\n\r\n");
  const std::size_t lf = received.find("\n\n");
  if (crlf == std::string_view::npos && lf == std::string_view::npos) return std::string_view::npos;
  if (lf == std::string_view::npos || (crlf != std::string_view::npos && crlf < lf)) return crlf + 4;
  return lf + 2;
}

core::Result<RequestHead> parse_request_head(std::string_view head) {
  auto parsed = parse_request_line(next_line(head));
  if (!parsed.ok()) return parsed;
  RequestHead& request = parsed.value();
  for (std::string_view line = next_line(head); !line.empty(); line = next_line(head)) {
    if (line.front() == ' ' || line.front() == '\t') return malformed("folded header");
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) return malformed("header line");
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim(line.substr(colon + 1));
    if (equals_ignoring_case(name, "Transfer-Encoding")) request.has_body = true;
    if (equals_ignoring_case(name, "Content-Length") && value != "0") request.has_body = true;
  }
  return parsed;
}

std::optional<Response> refusal(const core::Result<RequestHead>& head) {
  if (!head.ok()) return Response{400, "text/plain; charset=utf-8", "bad request"};
  const RequestHead& request = head.value();
  if (request.method != "GET" && request.method != "HEAD") {
    return Response{405, "text/plain; charset=utf-8", "method not allowed"};
  }
  if (request.path.empty() || request.path.front() != '/') {
    return Response{400, "text/plain; charset=utf-8", "bad request"};
  }
  if (request.has_body) return Response{413, "text/plain; charset=utf-8", "request body not accepted"};
  return std::nullopt;
}

std::string serialize(const Response& response, bool with_body) {
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " + reason_phrase(response.status) + "\r\n";
  out += "Content-Type: " + response.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  out += "Connection: close\r\n";
  if (response.status == 405) out += "Allow: GET, HEAD\r\n";
  out += "\r\n";
  if (with_body) out += response.body;
  return out;
}

}  // namespace outboxd::metrics
