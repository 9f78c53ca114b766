// Parsing of the config's connection strings: AMQP URLs, libpq URIs and conninfo strings.
#include "config/url.hpp"

#include <charconv>

#include "config/redact.hpp"

namespace outboxd::config {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool is_scheme_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
         c == '.';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::size_t skip_spaces(std::string_view text, std::size_t pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
  return pos;
}

// Splits "host:port" or "[v6]:port"; port is empty when absent.
bool split_host_port(std::string_view hostport, std::string_view& host, std::string_view& port) {
  if (!hostport.empty() && hostport.front() == '[') {
    const auto close = hostport.find(']');
    if (close == std::string_view::npos) return false;
    host = hostport.substr(1, close - 1);
    const std::string_view after = hostport.substr(close + 1);
    if (after.empty()) {
      port = {};
      return true;
    }
    if (after.front() != ':') return false;
    port = after.substr(1);
    return true;
  }
  const auto colon = hostport.find(':');
  if (colon == std::string_view::npos) {
    host = hostport;
    port = {};
    return true;
  }
  if (hostport.find(':', colon + 1) != std::string_view::npos) return false;
  host = hostport.substr(0, colon);
  port = hostport.substr(colon + 1);
  return true;
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

void apply_pg_param(PgTarget& target, std::string_view key, std::string value) {
  if (key == "host" || (key == "hostaddr" && target.host.empty())) target.host = std::move(value);
  else if (key == "port") target.port = std::move(value);
  else if (key == "dbname") target.dbname = std::move(value);
  else if (key == "user") target.user = std::move(value);
  else if (key == "password") target.has_password = !value.empty();
}

core::Result<PgTarget> parse_pg_uri(const UriParts& uri) {
  PgTarget target;
  if (uri.has_userinfo) {
    const auto colon = uri.userinfo.find(':');
    target.user = percent_decode(uri.userinfo.substr(0, colon));
    target.has_password = colon != std::string_view::npos && colon + 1 < uri.userinfo.size();
  }
  if (uri.hostport.find(',') != std::string_view::npos) {
    target.host = percent_decode(uri.hostport);
  } else {
    std::string_view host;
    std::string_view port;
    if (!split_host_port(uri.hostport, host, port)) {
      return core::fatal_error("cannot parse the host and port \"" + std::string(uri.hostport) + "\"");
    }
    target.host = percent_decode(host);
    target.port = std::string(port);
  }
  if (uri.path.size() > 1) target.dbname = percent_decode(uri.path.substr(1));
  std::string_view query = uri.query;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    const auto eq = param.find('=');
    if (eq == std::string_view::npos) return core::fatal_error("query parameter \"" + std::string(param) + "\" has no value");
    apply_pg_param(target, param.substr(0, eq), percent_decode(param.substr(eq + 1)));
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
  }
  return target;
}

}  // namespace

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 && hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::optional<UriParts> split_uri(std::string_view text) {
  const auto marker = text.find("://");
  if (marker == std::string_view::npos || marker == 0) return std::nullopt;
  for (std::size_t i = 0; i < marker; ++i) {
    if (!is_scheme_char(text[i])) return std::nullopt;
  }
  UriParts parts;
  parts.scheme = text.substr(0, marker);
  std::string_view rest = text.substr(marker + 3);

  const auto hash = rest.find('#');
  if (hash != std::string_view::npos) {
    parts.has_fragment = true;
    parts.fragment = rest.substr(hash + 1);
    rest = rest.substr(0, hash);
  }
  const auto question = rest.find('?');
  if (question != std::string_view::npos) {
    parts.has_query = true;
    parts.query = rest.substr(question + 1);
    rest = rest.substr(0, question);
  }
  const auto slash = rest.find('/');
  if (slash != std::string_view::npos) {
    parts.path = rest.substr(slash);
    rest = rest.substr(0, slash);
  }
  const auto at = rest.rfind('@');
  if (at != std::string_view::npos) {
    parts.has_userinfo = true;
    parts.userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
  }
  parts.hostport = rest;
  return parts;
}

core::Result<AmqpEndpoint> parse_amqp_url(std::string_view url) {
  const auto uri = split_uri(url);
  if (!uri || (uri->scheme != "amqp" && uri->scheme != "amqps")) {
    return bad_amqp_url(url, "must start with amqp:// or amqps://");
  }
  if (uri->has_userinfo) {
    return bad_amqp_url(url, "must not contain credentials; set broker.username and broker.password instead");
  }
  if ((!uri->path.empty() && uri->path != "/") || uri->has_query || uri->has_fragment) {
    return bad_amqp_url(url, "must be amqp://host:port or amqps://host:port, without a path or query");
  }
  std::string_view host;
  std::string_view port;
  if (!split_host_port(uri->hostport, host, port)) {
    return bad_amqp_url(url, "cannot parse the host and port (an IPv6 address needs brackets: [::1]:5672)");
  }
  if (host.empty()) return bad_amqp_url(url, "has no host");
  AmqpEndpoint endpoint;
  endpoint.tls = uri->scheme == "amqps";
  endpoint.host = std::string(host);
  endpoint.port = endpoint.tls ? 5671 : 5672;
  if (!port.empty() || uri->hostport.back() == ':') {
    const auto number = parse_port(port);
    if (!number) return bad_amqp_url(url, "the port must be a number between 1 and 65535");
    endpoint.port = *number;
  }
  return endpoint;
}

ConninfoValue scan_conninfo_value(std::string_view text, std::size_t pos) {
  ConninfoValue out;
  if (pos < text.size() && text[pos] == '\'') {
    ++pos;
    while (pos < text.size() && text[pos] != '\'') {
      if (text[pos] == '\\' && pos + 1 < text.size()) ++pos;
      out.value += text[pos++];
    }
    if (pos >= text.size()) {
      out.ok = false;
      out.end = pos;
      return out;
    }
    out.end = pos + 1;
    return out;
  }
  while (pos < text.size() && !is_space(text[pos])) {
    if (text[pos] == '\\' && pos + 1 < text.size()) ++pos;
    out.value += text[pos++];
  }
  out.end = pos;
  return out;
}

std::optional<std::vector<ConninfoPair>> parse_conninfo(std::string_view text) {
  std::vector<ConninfoPair> pairs;
  std::size_t pos = skip_spaces(text, 0);
  while (pos < text.size()) {
    const std::size_t key_start = pos;
    while (pos < text.size() && !is_space(text[pos]) && text[pos] != '=') ++pos;
    const std::string_view key = text.substr(key_start, pos - key_start);
    pos = skip_spaces(text, pos);
    if (key.empty() || pos >= text.size() || text[pos] != '=') return std::nullopt;
    pos = skip_spaces(text, pos + 1);
    ConninfoValue value = scan_conninfo_value(text, pos);
    if (!value.ok) return std::nullopt;
    pairs.push_back(ConninfoPair{std::string(key), std::move(value.value)});
    pos = skip_spaces(text, value.end);
  }
  if (pairs.empty()) return std::nullopt;
  return pairs;
}

core::Result<PgTarget> parse_pg_url(std::string_view url) {
  if (const auto uri = split_uri(url)) {
    if (uri->scheme != "postgresql" && uri->scheme != "postgres") {
      return core::fatal_error("a libpq URI must start with postgresql:// or postgres://");
    }
    return parse_pg_uri(*uri);
  }
  const auto pairs = parse_conninfo(url);
  if (!pairs) {
    return core::fatal_error(
        "must be a libpq URI (postgresql://user@host:5432/dbname) or a conninfo string (host=... dbname=...)");
  }
  PgTarget target;
  for (const auto& pair : *pairs) apply_pg_param(target, pair.key, pair.value);
  return target;
}

}  // namespace outboxd::config
