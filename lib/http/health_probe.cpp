// `outboxd healthcheck`'s client for /healthz on cpp-httplib.
#include "http/health_probe.hpp"

#include <httplib.h>

#include "config/listen_address.hpp"

namespace outboxd::metrics {

namespace {

std::string loopback_for(const std::string& host) {
  if (host == "0.0.0.0") return "127.0.0.1";
  if (host == "::") return "::1";
  return host;
}

std::string url_of(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return "http://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/healthz";
}

}  // namespace

core::Status probe_healthz(const std::string& listen, std::chrono::milliseconds timeout) {
  auto address = config::parse_listen_address(listen);
  if (!address.ok()) return core::fatal_error("http.listen: " + address.error().message);
  if (address.value().port == 0) {
    return core::fatal_error("http.listen " + listen + ": port 0 is chosen at start, so there is no port to ask");
  }
  const std::string host = loopback_for(address.value().host);
  const int port = address.value().port;
  const std::string url = url_of(host, port);

  httplib::Client client(host, port);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  const auto result = client.Get("/healthz");
  if (!result) return core::transient_error("GET " + url + ": " + httplib::to_string(result.error()));
  if (result->status != 200) {
    return core::transient_error("GET " + url + ": " + std::to_string(result->status) + " " + result->body);
  }
  return {};
}

}  // namespace outboxd::metrics
