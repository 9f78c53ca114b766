// Connection options for Proton from the validated settings.
#include "amqp/detail/proton_options.hpp"

#include <proton/duration.hpp>
#include <proton/ssl.hpp>

namespace outboxd::amqp {
namespace {

proton::ssl_client_options tls_options(const config::TlsConfig& tls) {
  const auto mode = tls.verify_host ? proton::ssl::VERIFY_PEER_NAME : proton::ssl::VERIFY_PEER;
  if (!tls.cert_file.empty()) {
    const proton::ssl_certificate certificate(tls.cert_file, tls.key_file);
    return {certificate, tls.ca_file.empty() ? kSystemTrustStore : tls.ca_file, mode};
  }
  if (!tls.ca_file.empty()) return {tls.ca_file, mode};
  return proton::ssl_client_options(mode);
}

}  // namespace

proton::connection_options make_connection_options(const config::BrokerConfig& broker,
                                                   const ConnectionSettings& settings) {
  proton::connection_options options;
  // Only the configured mechanisms: if the broker offers none of them the
  // connection fails with a reason instead of falling back to another one.
  options.sasl_enabled(true);
  options.sasl_allowed_mechs(settings.sasl_mechanisms);
  // Proton refuses PLAIN without TLS unless told otherwise; outboxd allows it,
  // as a local broker often has no TLS, and warns unless the host is loopback
  // (plain_over_cleartext, broker.allow_insecure_plain).
  options.sasl_allow_insecure_mechs(settings.plain_allowed && !settings.tls);
  if (!broker.username.empty()) options.user(broker.username);
  if (!broker.password.empty()) options.password(broker.password);
  options.idle_timeout(proton::duration(broker.idle_timeout.count()));
  if (settings.tls) options.ssl_client_options(tls_options(broker.tls));
  return options;
}

}  // namespace outboxd::amqp
