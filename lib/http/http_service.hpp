// cpp-httplib's server within fixed bounds: methods, request head and body size, connections, a whole-request deadline.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/result.hpp"

namespace outboxd::metrics {

// What one server accepts. cpp-httplib 0.11 bounds a request only per read
// (a read timeout) and per line; these are the bounds it is configured with
// and the three it lacks, kept by a Stream of our own (http_service.cpp).
struct HttpLimits {
  // From accept to the last byte of the response; a client that sends or
  // reads slower is dropped without an answer. Also the longest a connection
  // waits for a worker.
  std::chrono::seconds deadline{5};
  // The request line and all headers together; more is answered 431 and the
  // rest is not read. Scrapers, probes and browsers send a few hundred bytes.
  std::size_t max_head = 8 * 1024;
  // 0: a request announcing a body (Content-Length other than 0, or any
  // Transfer-Encoding) is answered 413 unread; else a Content-Length up to
  // this is read, a larger one or a chunked body answered 413 unread.
  std::size_t max_body = 0;
  // Connections open at once, waiting ones included; the next is closed at once.
  std::size_t max_connections = 64;
  // Threads serving connections, each one at a time; a slow client holds one
  // for at most `deadline`.
  std::size_t workers = 16;
  // Anything else is answered 405 with "Allow: <these>" before it is read further.
  std::vector<std::string> methods{"GET", "HEAD"};
};

// One request per connection ("Connection: close"). Register handlers on
// routes() before start(); a response of 400 and above without a body gets
// its status's reason as text.
class HttpService {
 public:
  explicit HttpService(HttpLimits limits);
  ~HttpService();  // stops
  HttpService(const HttpService&) = delete;
  HttpService& operator=(const HttpService&) = delete;

  httplib::Server& routes();

  // Binds "host:port" (port 0: a free one, see port()) before returning, so a
  // bad address or a port in use is a fatal error here, named after `key`,
  // e.g. "http.listen 127.0.0.1:9187: Address already in use"; then serves on
  // threads of its own. Once it succeeded, later calls fail; after a failure
  // it may be called again.
  core::Status start(const std::string& key, const std::string& listen);

  // The bound port; 0 before a successful start().
  int port() const;

  // Closes the listening socket and joins the threads (a connection being
  // served ends by its deadline at the latest); idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outboxd::metrics
