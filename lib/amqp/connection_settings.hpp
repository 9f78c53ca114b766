// What a broker connection needs, taken from the config's parsed BrokerConfig before connecting.
#pragma once

#include <string>

#include "config/config.hpp"
#include "core/result.hpp"

namespace outboxd::amqp {

struct ConnectionSettings {
  std::string url;                 // as configured, for Proton's connect()
  std::string host;                // broker.endpoint's
  std::string port;
  bool tls = false;                // amqps:// or broker.tls.enabled
  std::string sasl_mechanisms;     // space-separated, for Proton's sasl_allowed_mechs
  bool plain_allowed = false;      // PLAIN is among the mechanisms
  bool loopback = false;           // host is localhost, 127.0.0.0/8 or ::1
  // PLAIN over cleartext TCP to a non-loopback host, not silenced by
  // broker.allow_insecure_plain: the daemon should warn.
  bool plain_over_cleartext = false;
};

// The URL comes parsed (broker.endpoint) and the mechanisms decided
// (config::sasl_mechanisms_of) by the config, which also checked that each
// mechanism has what it needs; Proton never falls back to a mechanism that is
// not in the list. Errors (kind fatal): an unparsed endpoint, TLS files that
// cannot be read (now: they may have gone since the config was loaded).
core::Result<ConnectionSettings> connection_settings(const config::BrokerConfig& broker);

bool is_loopback_host(const std::string& host);

}  // namespace outboxd::amqp
