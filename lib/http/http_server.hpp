// The /metrics, /healthz and /readyz endpoints, served from a thread of their own.
#pragma once

#include <chrono>
#include <string>

#include "core/result.hpp"
#include "metrics/health.hpp"
#include "http/http_service.hpp"
#include "metrics/registry.hpp"

namespace outboxd::metrics {

// GET /metrics  200, registry.render(), "text/plain; version=0.0.4"
// GET /healthz  200 "ok" while the main loop turned within stale_after, else 503 and why
// GET /readyz   200 "ok" when database, broker and leases are up and not stopping,
//               else 503 "not ready: ..." naming what is missing
// GET or HEAD of anything else: 404; other methods: 405; a request that
// announces a body: 413; a request head over 8 KiB: 431; 5 s per connection,
// 64 connections at once (HttpLimits' defaults). One request per connection
// ("Connection: close"); no body is ever read.
// The registry and the health state must outlive the server.
class HttpServer {
 public:
  HttpServer(const Registry& registry, const Health& health,
             std::chrono::seconds stale_after = std::chrono::seconds(30));

  // Binds "host:port" (port 0: a free one, see port()) before returning, so
  // a bad address or a port in use is a fatal error here, e.g.
  // "http.listen 127.0.0.1:9187: Address already in use"; then serves on
  // threads of its own. Once it succeeded, later calls fail; after a failure
  // it may be called again.
  core::Status start(const std::string& listen);

  // The bound port; 0 before a successful start().
  int port() const;

  // Closes the listening socket and joins the threads; idempotent. The
  // destructor stops too.
  void stop();

 private:
  HttpService service_;
};

}  // namespace outboxd::metrics
