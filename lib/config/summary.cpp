// The one-line, secret-free description of a loaded config that `outboxd check-config` prints.
#include <algorithm>

#include "config/loader.hpp"
#include "config/names.hpp"
#include "config/url.hpp"

namespace outboxd::config {
namespace {

// Normalised to scheme://host:port, so the port in use shows even when the url leaves it out;
// the nodes of broker.urls in the order they are tried.
std::string describe_brokers(const BrokerConfig& broker) {
  std::string out = broker.endpoints.size() == 1 ? "broker " : "brokers ";
  for (std::size_t i = 0; i < broker.endpoints.size(); ++i) {
    const auto& endpoint = broker.endpoints[i];
    out += (i == 0 ? "" : ", ") + std::string(endpoint.tls ? "amqps://" : "amqp://") + host_port(endpoint);
  }
  if (broker.endpoints.size() > 1) out += " (tried in this order)";
  return out;
}

std::string describe_sasl(const BrokerConfig& broker) {
  if (broker.sasl_mechanisms.empty()) return "no SASL mechanism";
  std::string out;
  for (const auto& mechanism : broker.sasl_mechanisms) {
    if (!out.empty()) out += ' ';
    out += mechanism;
  }
  const bool plain = std::find(broker.sasl_mechanisms.begin(), broker.sasl_mechanisms.end(), kSaslPlain) !=
                     broker.sasl_mechanisms.end();
  if (plain && !broker.username.empty()) out += " as " + broker.username;
  return out;
}

// Said only when on: an operator checking a config sees that messages change shape.
std::string describe_cloudevents(const CloudEventsConfig& cloudevents) {
  if (!cloudevents.enabled) return "";
  const auto count = cloudevents.destinations.size();
  const std::string where = count == 0   ? "every destination"
                            : count == 1 ? "1 destination"
                                         : std::to_string(count) + " destinations";
  return ", CloudEvents from " + cloudevents.source + " for " + where;
}

}  // namespace

std::string summary(const Config& config) {
  std::string out = "ok: database " + describe(config.database.target);
  if (config.database.pooler != Pooler::none) {
    out += " (through a " + std::string(to_string(config.database.pooler)) + " pooler)";
  }
  out += ", " + describe_brokers(config.broker);
  out += " (" + std::string(to_string(config.broker.profile)) + ", " + describe_sasl(config.broker) + ")";
  out += describe_cloudevents(config.broker.cloudevents);
  out += ", schema " + config.outbox.schema;
  out += ", " + std::to_string(config.outbox.partitions) + (config.outbox.partitions == 1 ? " partition" : " partitions");
  return out;
}

}  // namespace outboxd::config
