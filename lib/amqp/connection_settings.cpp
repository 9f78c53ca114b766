// Connection settings from the config's parsed endpoints and SASL decision; TLS files checked again.
#include "amqp/connection_settings.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "config/security_warnings.hpp"
#include "config/url.hpp"

namespace outboxd::amqp {
namespace {

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

core::Result<ConnectionSettings> connection_settings(const config::BrokerConfig& broker) {
  if (broker.endpoints.empty()) return core::fatal_error("broker.url was not parsed (config::set_broker_url)");
  ConnectionSettings out;
  out.loopback = true;
  for (const auto& endpoint : broker.endpoints) {
    const auto name = config::host_port(endpoint);
    out.nodes.push_back({(endpoint.tls ? "amqps://" : "amqp://") + name, endpoint.host,
                         std::to_string(endpoint.port), name});
    out.loopback = out.loopback && config::is_loopback_host(endpoint.host);
  }
  out.tls = broker.endpoints.front().tls || broker.tls.enabled;
  if (out.tls) {
    if (auto files = check_tls_files(broker.tls); !files) return files.error();
  }
  for (const auto& mechanism : config::sasl_mechanisms_of(broker)) {
    if (!out.sasl_mechanisms.empty()) out.sasl_mechanisms += ' ';
    out.sasl_mechanisms += mechanism;
    out.plain_allowed = out.plain_allowed || mechanism == "PLAIN";
  }
  out.plain_over_cleartext = out.plain_allowed && !out.tls && !out.loopback && !broker.allow_insecure_plain;
  return out;
}

}  // namespace outboxd::amqp
