// The request heads the HTTP endpoint accepts and the responses it writes, without I/O.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace outboxd::metrics {

// The request line and all headers together; a longer head is answered 431
// without being read further. Scrapers and probes send a few hundred bytes.
inline constexpr std::size_t kMaxRequestHead = 8 * 1024;

struct RequestHead {
  std::string method;     // "GET", "HEAD", "POST", ...
  std::string path;       // the target without its query string: "/metrics"
  bool has_body = false;  // a Content-Length other than 0, or any Transfer-Encoding
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// One past the blank line that ends the head ("\r\n\r\n", or "\n\n" from a
// lenient client) in what was received so far; npos while it has not come.
std::size_t request_head_end(std::string_view received);

// The request line "METHOD /target HTTP/1.x" and the headers that follow it.
// Rejected when the request line is malformed, the version is not HTTP/1.0 or
// 1.1, a header line has no name, or a header is folded.
core::Result<RequestHead> parse_request_head(std::string_view head);

// The answer a request gets whatever its path: 400 for a malformed head, 405
// for a method other than GET and HEAD, 413 for a request with a body (never
// read); nothing when it may be routed.
std::optional<Response> refusal(const core::Result<RequestHead>& head);

// The status line, Content-Type, Content-Length, "Connection: close" (one
// request per connection), "Allow: GET, HEAD" on a 405, then the body unless
// `with_body` is false (a HEAD request).
std::string serialize(const Response& response, bool with_body);

}  // namespace outboxd::metrics
