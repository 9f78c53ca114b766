// What a broker connection needs, derived and validated from BrokerConfig before connecting.
#pragma once

#include <string>

#include "config/config.hpp"
#include "core/result.hpp"

namespace outboxd::amqp {

struct ConnectionSettings {
  std::string url;                 // as configured
  std::string host;
  std::string port;
  bool tls = false;                // amqps:// or broker.tls.enabled
  std::string sasl_mechanisms;     // space-separated, for Proton's sasl_allowed_mechs
  bool plain_allowed = false;      // PLAIN is among the mechanisms
  bool loopback = false;           // host is localhost, 127.0.0.0/8 or ::1
  // PLAIN over cleartext TCP to a non-loopback host, not silenced by
  // broker.allow_insecure_plain: the daemon should warn.
  bool plain_over_cleartext = false;
};

// Mechanisms: broker.sasl_mechanisms if set (PLAIN, EXTERNAL, ANONYMOUS are
// supported by Proton's built-in SASL), else PLAIN with a username and
// ANONYMOUS without one. Proton never falls back to a mechanism that is not in
// the list. Errors (kind fatal): a URL that is not amqp:// or amqps:// with a
// host, an unknown mechanism, PLAIN without a username, EXTERNAL without TLS
// and a client certificate.
core::Result<ConnectionSettings> connection_settings(const config::BrokerConfig& broker);

bool is_loopback_host(const std::string& host);

}  // namespace outboxd::amqp
