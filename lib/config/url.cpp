// AMQP URLs, parsed by hand: amqp://host[:port] is all broker.url accepts (Proton offers no URL parser).
#include "config/url.hpp"

#include <charconv>
#include <optional>

#include "config/redact.hpp"

namespace outboxd::config {
namespace {

bool is_scheme_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
         c == '.';
}

// Splits "host:port" or "[v6]:port"; port is empty when absent.
bool split_host_port(std::string_view hostport, std::string_view& host, std::string_view& port) {
  if (!hostport.empty() && hostport.front() == '[') {
    const auto close = hostport.find(']');
    if (close == std::string_view::npos) return false;
    host = hostport.substr(1, close - 1);
    const std::string_view after = hostport.substr(close + 1);
    port = {};
    if (after.empty()) return true;
    if (after.front() != ':') return false;
    port = after.substr(1);
    return true;
  }
  const auto colon = hostport.find(':');
  host = hostport.substr(0, colon);
  port = colon == std::string_view::npos ? std::string_view() : hostport.substr(colon + 1);
  return colon == std::string_view::npos || hostport.find(':', colon + 1) == std::string_view::npos;
}

std::optional<int> parse_port(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1 || value > 65535) return std::nullopt;
  return value;
}

core::Error bad_amqp_url(std::string_view url, const std::string& reason) {
  return core::fatal_error(reason + " (got \"" + redact(url) + "\")");
}

}  // namespace

core::Result<AmqpEndpoint> parse_amqp_url(std::string_view url) {
  const auto marker = url.find("://");
  std::string_view scheme = marker == std::string_view::npos ? std::string_view() : url.substr(0, marker);
  for (const char c : scheme) {
    if (!is_scheme_char(c)) scheme = {};
  }
  if (scheme != "amqp" && scheme != "amqps") return bad_amqp_url(url, "must start with amqp:// or amqps://");
  std::string_view rest = url.substr(marker + 3);
  const auto end = rest.find_first_of("/?#");
  const std::string_view hostport = rest.substr(0, end);
  const std::string_view after = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  if (rest.substr(0, rest.find_first_of("?#")).find('@') != std::string_view::npos) {
    return bad_amqp_url(url, "must not contain credentials; set broker.username and broker.password instead");
  }
  if (!after.empty() && after != "/") {
    return bad_amqp_url(url, "must be amqp://host:port or amqps://host:port, without a path or query");
  }
  std::string_view host;
  std::string_view port;
  if (!split_host_port(hostport, host, port)) {
    return bad_amqp_url(url, "cannot parse the host and port (an IPv6 address needs brackets: [::1]:5672)");
  }
  if (host.empty()) return bad_amqp_url(url, "has no host");
  AmqpEndpoint endpoint;
  endpoint.tls = scheme == "amqps";
  endpoint.host = std::string(host);
  endpoint.port = endpoint.tls ? 5671 : 5672;
  if (!port.empty() || hostport.back() == ':') {
    const auto number = parse_port(port);
    if (!number) return bad_amqp_url(url, "the port must be a number between 1 and 65535");
    endpoint.port = *number;
  }
  return endpoint;
}

core::Status set_broker_url(BrokerConfig& broker, std::string url) {
  auto endpoint = parse_amqp_url(url);
  if (!endpoint) return core::Error{endpoint.error().kind, "broker.url " + endpoint.error().message};
  broker.url = std::move(url);
  broker.urls.clear();
  broker.endpoints = {std::move(endpoint).value()};
  broker.tls.enabled = broker.endpoints.front().tls;
  return {};
}

std::string host_port(const AmqpEndpoint& endpoint) {
  const bool ipv6 = endpoint.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" + std::to_string(endpoint.port);
}

}  // namespace outboxd::config
