// The /metrics, /healthz and /readyz endpoints as GET routes of a bounded cpp-httplib server.
#include "http/http_server.hpp"

namespace outboxd::metrics {

namespace {

constexpr const char* kMetricsContentType = "text/plain; version=0.0.4";
constexpr const char* kTextContentType = "text/plain; charset=utf-8";

void send_verdict(httplib::Response& response, const Verdict& verdict) {
  response.status = verdict.ok ? 200 : 503;
  response.set_content(verdict.text, kTextContentType);
}

}  // namespace

HttpServer::HttpServer(const Registry& registry, const Health& health, std::chrono::seconds stale_after)
    : service_(HttpLimits{}) {
  httplib::Server& routes = service_.routes();
  routes.Get("/metrics", [&registry](const httplib::Request&, httplib::Response& response) {
    response.set_content(registry.render(), kMetricsContentType);
  });
  routes.Get("/healthz", [&health, stale_after](const httplib::Request&, httplib::Response& response) {
    send_verdict(response, liveness(health, std::chrono::steady_clock::now(), stale_after));
  });
  routes.Get("/readyz", [&health](const httplib::Request&, httplib::Response& response) {
    send_verdict(response, readiness(health));
  });
}

core::Status HttpServer::start(const std::string& listen) { return service_.start("http.listen", listen); }

int HttpServer::port() const { return service_.port(); }

void HttpServer::stop() { service_.stop(); }

}  // namespace outboxd::metrics
