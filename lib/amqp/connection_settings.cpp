// Validation of the broker URL and the SASL/TLS choices.
#include "amqp/connection_settings.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>

namespace outboxd::amqp {
namespace {

constexpr std::array<std::string_view, 3> kMechanisms{"PLAIN", "EXTERNAL", "ANONYMOUS"};

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return text;
}

// scheme://[user[:password]@]host[:port][/path]; IPv6 hosts in brackets.
core::Status parse_url(const std::string& url, ConnectionSettings& out) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) {
    return core::fatal_error("broker.url: expected amqp://host:port or amqps://host:port, got \"" + url + "\"");
  }
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "amqp" && scheme != "amqps") {
    return core::fatal_error("broker.url: unsupported scheme \"" + scheme + "\" (amqp or amqps)");
  }
  out.tls = scheme == "amqps";
  std::string authority = url.substr(scheme_end + 3);
  authority = authority.substr(0, authority.find('/'));
  if (const auto at = authority.rfind('@'); at != std::string::npos) authority.erase(0, at + 1);
  std::string port;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string::npos) return core::fatal_error("broker.url: unterminated IPv6 address");
    out.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') port = authority.substr(close + 2);
  } else {
    const auto colon = authority.rfind(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return core::fatal_error("broker.url: no host in \"" + url + "\"");
  out.port = port.empty() ? (out.tls ? "5671" : "5672") : port;
  if (!std::all_of(out.port.begin(), out.port.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return core::fatal_error("broker.url: port \"" + out.port + "\" is not a number");
  }
  return {};
}

core::Status choose_mechanisms(const config::BrokerConfig& broker, ConnectionSettings& out) {
  std::vector<std::string> chosen;
  for (const auto& mechanism : broker.sasl_mechanisms) chosen.push_back(upper(mechanism));
  if (chosen.empty()) chosen.push_back(broker.username.empty() ? "ANONYMOUS" : "PLAIN");
  for (const auto& mechanism : chosen) {
    if (std::find(kMechanisms.begin(), kMechanisms.end(), mechanism) == kMechanisms.end()) {
      return core::fatal_error("broker.sasl_mechanisms: unsupported mechanism \"" + mechanism +
                               "\" (PLAIN, EXTERNAL or ANONYMOUS)");
    }
    if (!out.sasl_mechanisms.empty()) out.sasl_mechanisms += ' ';
    out.sasl_mechanisms += mechanism;
  }
  const auto has = [&](std::string_view name) { return std::find(chosen.begin(), chosen.end(), name) != chosen.end(); };
  out.plain_allowed = has("PLAIN");
  if (out.plain_allowed && broker.username.empty()) {
    return core::fatal_error("broker.sasl_mechanisms: PLAIN needs broker.username");
  }
  if (has("EXTERNAL") && (!out.tls || broker.tls.cert_file.empty() || broker.tls.key_file.empty())) {
    return core::fatal_error(
        "broker.sasl_mechanisms: EXTERNAL needs TLS with broker.tls.cert_file and broker.tls.key_file");
  }
  return {};
}

core::Status check_readable(const char* key, const std::string& path) {
  if (path.empty()) return {};
  std::ifstream file(path);
  if (!file) return core::fatal_error(std::string(key) + ": cannot read \"" + path + "\": " + std::strerror(errno));
  return {};
}

// Checked here because Proton leaks its TLS context when a file fails to load.
core::Status check_tls_files(const config::TlsConfig& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return core::fatal_error("broker.tls: cert_file and key_file go together");
  }
  for (const auto& [key, path] : {std::pair{"broker.tls.ca_file", &tls.ca_file},
                                  std::pair{"broker.tls.cert_file", &tls.cert_file},
                                  std::pair{"broker.tls.key_file", &tls.key_file}}) {
    if (auto readable = check_readable(key, *path); !readable) return readable;
  }
  return {};
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.") || host == "ip6-localhost";
}

core::Result<ConnectionSettings> connection_settings(const config::BrokerConfig& broker) {
  ConnectionSettings out;
  out.url = broker.url;
  if (auto url = parse_url(broker.url, out); !url) return url.error();
  out.tls = out.tls || broker.tls.enabled;
  if (out.tls) {
    if (auto files = check_tls_files(broker.tls); !files) return files.error();
  }
  if (auto mechanisms = choose_mechanisms(broker, out); !mechanisms) return mechanisms.error();
  out.loopback = is_loopback_host(out.host);
  out.plain_over_cleartext = out.plain_allowed && !out.tls && !out.loopback && !broker.allow_insecure_plain;
  return out;
}

}  // namespace outboxd::amqp
