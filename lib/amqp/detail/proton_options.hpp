// BrokerConfig -> proton::connection_options: SASL mechanisms, credentials, TLS, heartbeat.
#pragma once

#include <proton/connection_options.hpp>

#include "amqp/connection_settings.hpp"
#include "config/config.hpp"

namespace outboxd::amqp {

// Debian's bundle of the system's trusted CAs: used as the trust store when a
// client certificate is configured without broker.tls.ca_file, because
// Proton's client-certificate constructor needs an explicit trust store.
inline constexpr const char* kSystemTrustStore = "/etc/ssl/certs/ca-certificates.crt";

// Throws proton::error when the TLS files cannot be loaded.
proton::connection_options make_connection_options(const config::BrokerConfig& broker,
                                                   const ConnectionSettings& settings);

}  // namespace outboxd::amqp
