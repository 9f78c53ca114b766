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

std::string describe_database(const DatabaseConfig& database) {
  std::string out = describe(database.target);
  if (database.pooler != Pooler::none) out += " (through a " + std::string(to_string(database.pooler)) + " pooler)";
  return out;
}

std::string describe_partitions(int partitions) {
  return std::to_string(partitions) + (partitions == 1 ? " partition" : " partitions");
}

std::string describe_outboxes(const Config& config) {
  const auto count = config.outboxes.size();
  const bool catalog = !config.tenants.catalog.query.empty();
  if (count == 0) return "outboxes from a catalog";
  return std::to_string(count) + (count == 1 ? " outbox" : " outboxes") + " listed" +
         (catalog ? " and more from a catalog" : "");
}

std::string ms(std::chrono::milliseconds value) { return std::to_string(value.count()) + " ms"; }

// A query written over several lines (a YAML block) on one line.
std::string one_line(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (!space) out += c;
    else if (!out.empty() && out.back() != ' ') out += ' ';
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

std::string summary(const Config& config) {
  const bool many = config.many_outboxes();
  std::string out = "ok: " + (many ? describe_outboxes(config) : "database " + describe_database(config.database));
  out += ", " + describe_brokers(config.broker);
  out += " (" + std::string(to_string(config.broker.profile)) + ", " + describe_sasl(config.broker) + ")";
  out += describe_cloudevents(config.broker.cloudevents);
  if (!many) out += ", schema " + config.outbox.schema + ", " + describe_partitions(config.outbox.partitions);
  return out;
}

std::vector<std::string> outboxes_summary(const Config& config) {
  if (!config.many_outboxes()) return {};
  std::vector<std::string> lines;
  for (const auto& entry : config.outboxes) {
    lines.push_back("outbox " + entry.name + ": " + describe_database(entry.database) + ", schema " +
                    entry.outbox.schema + ", workflow_schema " + entry.outbox.workflow_schema + ", " +
                    describe_partitions(entry.outbox.partitions));
  }
  const CatalogConfig& catalog = config.tenants.catalog;
  if (!catalog.query.empty()) {
    lines.push_back("catalog: " + describe_database(catalog.database) + ", read every " +
                    ms(catalog.refresh_interval) + ": " + one_line(catalog.query));
  }
  const TenantsConfig& tenants = config.tenants;
  lines.push_back("tenants: max_connections " + std::to_string(tenants.max_connections) + ", idle_check_interval " +
                  ms(tenants.idle_check_interval) + ", release_after " + ms(tenants.release_after));
  return lines;
}

}  // namespace outboxd::config
