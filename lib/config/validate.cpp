// Rules that involve more than one key: timing order, lease arithmetic, schema names, TLS, passwords, CloudEvents.
#include <algorithm>

#include "config/checks.hpp"
#include "config/scalar.hpp"

namespace outboxd::config {
namespace {

std::string ms(std::chrono::milliseconds value) { return std::to_string(value.count()); }

void check_reconnect(std::string_view section, std::chrono::milliseconds min, std::chrono::milliseconds max,
                     CrossCheck& check) {
  const std::string min_key = std::string(section) + ".reconnect_min_ms";
  const std::string max_key = std::string(section) + ".reconnect_max_ms";
  if (!check.usable({min_key, max_key}) || max >= min) return;
  check.fail({max_key, min_key},
             "reconnect_max_ms (" + ms(max) + ") must be at least reconnect_min_ms (" + ms(min) + ")");
}

void check_tls(const TlsConfig& tls, CrossCheck& check) {
  const bool any_file = !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty();
  if (!tls.enabled && any_file && check.usable({"broker.url", "broker.urls", "broker.tls"})) {
    check.fail({"broker.tls.ca_file", "broker.tls.cert_file", "broker.tls.key_file"},
               check.given("broker.urls") ? "TLS files need amqps:// urls (broker.urls are amqp://)"
                                          : "TLS files need an amqps:// url (broker.url is amqp://)");
  }
  if (tls.cert_file.empty() != tls.key_file.empty() && check.usable({"broker.tls.cert_file", "broker.tls.key_file"})) {
    check.fail({"broker.tls.cert_file", "broker.tls.key_file"},
               "tls.cert_file and tls.key_file go together: give both or neither");
  }
}

void check_dispatch(const DispatchConfig& dispatch, CrossCheck& check) {
  if (dispatch.backoff_max < dispatch.backoff_initial &&
      check.usable({"dispatch.backoff_initial_ms", "dispatch.backoff_max_ms"})) {
    check.fail({"dispatch.backoff_max_ms", "dispatch.backoff_initial_ms"},
               "backoff_max_ms (" + ms(dispatch.backoff_max) + ") must be at least backoff_initial_ms (" +
                   ms(dispatch.backoff_initial) + ")");
  }
  if (dispatch.per_session_in_flight > dispatch.in_flight &&
      check.usable({"dispatch.per_session_in_flight", "dispatch.in_flight"})) {
    check.fail({"dispatch.per_session_in_flight", "dispatch.in_flight"},
               "per_session_in_flight (" + std::to_string(dispatch.per_session_in_flight) +
                   ") must not exceed in_flight (" + std::to_string(dispatch.in_flight) + ")");
  }
}

void check_leases(const LeaseConfig& leases, CrossCheck& check) {
  if (leases.renew_interval + leases.safety_margin < leases.lease_ttl ||
      !check.usable({"leases.lease_ttl_ms", "leases.renew_interval_ms", "leases.safety_margin_ms"})) {
    return;
  }
  check.fail({"leases.lease_ttl_ms", "leases.renew_interval_ms", "leases.safety_margin_ms"},
             "renew_interval_ms (" + ms(leases.renew_interval) + ") + safety_margin_ms (" + ms(leases.safety_margin) +
                 ") must be less than lease_ttl_ms (" + ms(leases.lease_ttl) +
                 "), or a lease could lapse before it is renewed");
}

void check_cloudevents(const CloudEventsConfig& cloudevents, CrossCheck& check) {
  if (!cloudevents.enabled || !cloudevents.source.empty() ||
      !check.usable({"broker.cloudevents.enabled", "broker.cloudevents.source"})) {
    return;
  }
  check.fail({"broker.cloudevents.source", "broker.cloudevents.enabled"},
             "source is required when cloudevents is enabled (every event names its source)");
}

}  // namespace

std::optional<std::string> password_given_twice(const DatabaseConfig& database) {
  if (database.password.empty() || database.target.get("password").empty()) return std::nullopt;
  return "the url already contains a password; give it in one place only";
}

std::optional<std::string> schemas_problem(const OutboxConfig& outbox) {
  if (outbox.schema != outbox.workflow_schema) return std::nullopt;
  return "schema and workflow_schema must differ (both are " + quote_value(outbox.schema) + ")";
}

void check_database(const DatabaseConfig& database, const std::string& section, CrossCheck& check) {
  check_reconnect(section, database.reconnect_min, database.reconnect_max, check);
  const std::string url = section + ".url";
  const std::string password = section + ".password";
  const std::string password_file = section + ".password_file";
  if (!check.usable({url, password, password_file})) return;
  if (auto twice = password_given_twice(database)) check.fail({password, password_file, url}, *twice);
}

void check_outbox(const OutboxConfig& outbox, const std::string& section, CrossCheck& check) {
  const std::string schema = section + ".schema";
  const std::string workflow_schema = section + ".workflow_schema";
  if (!check.usable({schema, workflow_schema})) return;
  if (auto problem = schemas_problem(outbox)) check.fail({workflow_schema, schema}, *problem);
}

bool CrossCheck::usable(std::initializer_list<std::string_view> paths) const {
  for (const auto path : paths) {
    if (diagnostics_.has_error_at(path)) return false;
  }
  return true;
}

void CrossCheck::fail(std::initializer_list<std::string_view> paths, std::string message) {
  if (only_given_ && std::none_of(paths.begin(), paths.end(), [&](std::string_view path) { return given(path); })) {
    return;
  }
  std::string chosen(*paths.begin());
  for (const auto path : paths) {
    if (positions_.given(std::string(path))) {
      chosen = std::string(path);
      break;
    }
  }
  diagnostics_.add(positions_.at(chosen), chosen, std::move(message));
}

void validate(const Config& config, CrossCheck& check) {
  check_database(config.database, "database", check);
  check_reconnect("broker", config.broker.reconnect_min, config.broker.reconnect_max, check);
  check_tls(config.broker.tls, check);
  check_cloudevents(config.broker.cloudevents, check);
  check_dispatch(config.dispatch, check);
  check_leases(config.leases, check);
  check_outbox(config.outbox, "outbox", check);
  check_outboxes(config, check);
  check_tenants(config, check);
}

}  // namespace outboxd::config
