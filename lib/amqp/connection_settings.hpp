// What a broker connection needs, taken from the config's parsed BrokerConfig before connecting.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/result.hpp"

namespace outboxd::amqp {

// One broker node of broker.url or broker.urls.
struct BrokerNode {
  std::string url;   // scheme://host:port, for Proton's connect()
  std::string host;  // without IPv6 brackets
  std::string port;
  std::string name;  // host:port, for logs and metrics (never credentials: URLs hold none)
};

struct ConnectionSettings {
  std::vector<BrokerNode> nodes;   // in the order they are tried; at least one
  bool tls = false;                // amqps:// or broker.tls.enabled (the same for every node)
  std::string sasl_mechanisms;     // space-separated, for Proton's sasl_allowed_mechs
  bool plain_allowed = false;      // PLAIN is among the mechanisms
  bool loopback = false;           // every node's host is localhost, 127.0.0.0/8 or ::1
  // PLAIN over cleartext TCP to a non-loopback node, not silenced by
  // broker.allow_insecure_plain: the daemon should warn.
  bool plain_over_cleartext = false;
};

// The URLs come parsed (broker.endpoints) and the mechanisms decided
// (config::sasl_mechanisms_of) by the config, which also checked that each
// mechanism has what it needs; Proton never falls back to a mechanism that is
// not in the list. Errors (kind fatal): no parsed endpoint, TLS files that
// cannot be read (now: they may have gone since the config was loaded).
core::Result<ConnectionSettings> connection_settings(const config::BrokerConfig& broker);

}  // namespace outboxd::amqp
