// Strict parsing of the HTTP listen address: "host:port" or "[ipv6]:port".
#include "config/listen_address.hpp"

#include "config/scalar.hpp"

namespace outboxd::config {

namespace {

core::Error bad(std::string_view text, std::string_view why) {
  return core::fatal_error(std::string(why) + " (got " + quote_value(text) + ")");
}

bool parse_port(std::string_view digits, int& port) {
  if (digits.empty() || digits.size() > 5) return false;
  int value = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (value > 65535) return false;
  port = value;
  return true;
}

bool plain_host(std::string_view host) {
  for (const char c : host) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7f || c == '[' || c == ']' || c == ':') return false;
  }
  return true;
}

bool ipv6_host(std::string_view host) {
  for (const char c : host) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    // '.' for the dotted tail of ::ffff:1.2.3.4, '%' for a zone (fe80::1%eth0).
    const bool zone = (c >= 'g' && c <= 'z') || (c >= 'G' && c <= 'Z');
    if (!hex && !zone && c != ':' && c != '.' && c != '%') return false;
  }
  return host.find(':') != std::string_view::npos;
}

}  // namespace

core::Result<ListenAddress> parse_listen_address(std::string_view text) {
  ListenAddress out;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return bad(text, "missing ']' after the IPv6 address");
    if (close + 1 >= text.size() || text[close + 1] != ':') return bad(text, "expected \":port\" after ']'");
    const auto host = text.substr(1, close - 1);
    if (!ipv6_host(host)) return bad(text, "not an IPv6 address between '[' and ']'");
    out.host = std::string(host);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad(text, "expected host:port");
    const auto host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos) return bad(text, "write an IPv6 address in brackets: [::1]:9187");
    if (host.empty()) return bad(text, "missing host (use 0.0.0.0 for every interface)");
    if (!plain_host(host)) return bad(text, "invalid character in the host");
    out.host = std::string(host);
    port = text.substr(colon + 1);
  }
  if (!parse_port(port, out.port)) return bad(text, "the port must be 1 to 5 digits, at most 65535");
  return out;
}

}  // namespace outboxd::config
