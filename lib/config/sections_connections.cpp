// Reading the database and broker sections: URLs, credentials, TLS files, connection timings.
#include <algorithm>

#include "config/scalar.hpp"
#include "config/secrets.hpp"
#include "config/sections.hpp"
#include "config/url.hpp"

namespace outboxd::config {
namespace {

constexpr IntRange kConnectTimeoutMs{100, 600'000};
constexpr IntRange kStatementTimeoutMs{0, 86'400'000};  // 0: no limit, as in PostgreSQL
constexpr IntRange kReconnectMinMs{1, 600'000};
constexpr IntRange kReconnectMaxMs{1, 3'600'000};
constexpr IntRange kIdleTimeoutMs{0, 3'600'000};        // 0: no heartbeats
constexpr IntRange kLinkIdleCloseMs{0, 86'400'000};     // 0: keep links open
constexpr IntRange kOutcomeTimeoutMs{100, 3'600'000};
constexpr std::size_t kMaxIdBytes = 256;

std::string upper(std::string text) {
  for (char& c : text) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return text;
}

void read_sasl_mechanisms(MapReader& broker, std::vector<std::string>& out) {
  const auto items = broker.list("sasl_mechanisms");
  if (!items) return;
  std::vector<std::string> mechanisms;
  for (const auto& item : *items) {
    const std::string name = upper(item.text);
    if (std::find(std::begin(kSaslMechanisms), std::end(kSaslMechanisms), name) == std::end(kSaslMechanisms)) {
      broker.report_at(item.at, item.path,
                       "must be one of: " + join_names(kSaslMechanisms) + " (got " + quote_value(item.text) + ")");
      continue;
    }
    if (std::find(mechanisms.begin(), mechanisms.end(), name) != mechanisms.end()) {
      broker.report_at(item.at, item.path, quote_value(name) + " is listed twice");
      continue;
    }
    mechanisms.push_back(name);
  }
  out = std::move(mechanisms);
}

void read_tls_file(MapReader& tls, std::string_view key, std::string& out) {
  std::string path;
  std::string written;
  if (!tls.file_path(key, path, &written)) return;
  // Checked now so that check-config finds it, not the first connection attempt.
  if (const auto readable = check_readable_file(path, written); !readable) {
    tls.report(key, readable.error().message);
    return;
  }
  out = std::move(path);
}

void read_tls(MapReader& broker, TlsConfig& out) {
  MapReader tls = broker.section("tls");
  read_tls_file(tls, "ca_file", out.ca_file);
  read_tls_file(tls, "cert_file", out.cert_file);
  read_tls_file(tls, "key_file", out.key_file);
  tls.boolean("verify_host", out.verify_host);
}

// none | any | a standby's application_name, which PostgreSQL keeps to
// NAMEDATALEN - 1 = 63 bytes of printable ASCII (it shows other bytes as '?',
// so such a name could never match).
void read_standby_wait(MapReader& database, StandbyWait& out) {
  std::string value;
  if (!database.nonempty_text("wait_for_standby", value)) return;
  if (value == "none") {
    out = {};
  } else if (value == "any") {
    out = {StandbyWait::Mode::any, {}};
  } else if (value.size() > 63 ||
             !std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c < 0x7f; })) {
    database.report("wait_for_standby",
                    "must be none, any, or a standby's application_name (at most 63 printable ASCII characters)");
  } else {
    out = {StandbyWait::Mode::named, std::move(value)};
  }
}

// broker.urls' entries, each checked as broker.url is, at its own position;
// out.endpoints is set only when every entry is usable.
void read_broker_url_list(MapReader& broker, const std::vector<MapReader::Item>& items, BrokerConfig& out) {
  std::vector<AmqpEndpoint> endpoints;
  std::vector<std::size_t> indexes;  // of each parsed endpoint in the list
  bool usable = true;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& item = items[i];
    out.urls.push_back(item.text);
    auto endpoint = parse_amqp_url(item.text);
    if (!endpoint) {
      broker.report_at(item.at, item.path, endpoint.error().message);
      usable = false;
      continue;
    }
    const auto same = std::find(endpoints.begin(), endpoints.end(), endpoint.value());
    if (same != endpoints.end()) {
      broker.report_at(item.at, item.path,
                       "names the same broker as urls[" + std::to_string(indexes[same - endpoints.begin()]) + "]");
      usable = false;
    } else if (!endpoints.empty() && endpoint.value().tls != endpoints.front().tls) {
      // One set of TLS and SASL settings serves every node.
      broker.report_at(item.at, item.path,
                       "all urls must use the same scheme, amqp:// or amqps:// (urls[" + std::to_string(indexes.front()) +
                           "] is " + (endpoints.front().tls ? "amqps://" : "amqp://") + ")");
      usable = false;
    }
    endpoints.push_back(std::move(endpoint).value());
    indexes.push_back(i);
  }
  if (usable) out.endpoints = std::move(endpoints);
}

// One broker (url, required unless urls is given) or the nodes of a cluster
// (urls), never both: which one the publisher would use must not be a guess.
void read_broker_urls(MapReader& broker, BrokerConfig& out) {
  if (!broker.given("urls")) {
    if (!broker.required_text("url", out.url)) return;
    auto endpoint = parse_amqp_url(out.url);
    if (!endpoint) return (void)broker.report("url", endpoint.error().message);
    out.endpoints = {std::move(endpoint).value()};
  } else if (std::string ignored; broker.text("url", ignored)) {
    broker.report("urls", "give either url (one broker) or urls (the nodes of a cluster), not both");
    (void)broker.list("urls");  // known, so not reported as unknown too
  } else if (const auto items = broker.list("urls"); items && items->empty()) {
    broker.report("urls", "must list at least one broker url");
  } else if (items) {
    read_broker_url_list(broker, *items, out);
  }
  if (!out.endpoints.empty()) out.tls.enabled = out.endpoints.front().tls;
}

}  // namespace

void read_password(MapReader& section, std::string& out, std::string& file_out) {
  std::string password;
  std::string file;
  std::string written;
  const bool has_password = section.secret("password", password);
  const bool has_file = section.file_path("password_file", file, &written);
  if (has_password && has_file) {
    section.report("password_file", "give either password or password_file, not both");
    return;
  }
  if (has_password) out = std::move(password);
  if (!has_file) return;
  auto content = read_secret_file(file, written);
  if (!content) {
    section.report("password_file", content.error().message);
    return;
  }
  out = std::move(content).value();
  file_out = std::move(file);
}

void read_database(MapReader& root, DatabaseConfig& out) {
  MapReader database = root.section("database");
  if (database.required_text("url", out.url)) {
    auto target = parse_pg_url(out.url);
    if (target) out.target = std::move(target).value();
    else database.report("url", target.error().message);
  }
  read_password(database, out.password, out.password_file);
  database.millis("connect_timeout_ms", out.connect_timeout, kConnectTimeoutMs);
  database.millis("statement_timeout_ms", out.statement_timeout, kStatementTimeoutMs);
  database.millis("reconnect_min_ms", out.reconnect_min, kReconnectMinMs);
  database.millis("reconnect_max_ms", out.reconnect_max, kReconnectMaxMs);
  database.choice<Pooler>("pooler", out.pooler, kPoolers);
  if (database.nonempty_text("listen_url", out.listen_url)) {
    auto target = parse_pg_url(out.listen_url);
    if (!target) {
      database.report("listen_url", target.error().message);
    } else if (out.pooler != Pooler::transaction) {
      // With no pooler or a session pooler the main connection LISTENs itself.
      database.report("listen_url", "is only used with pooler: transaction");
    } else {
      out.listen_target = std::move(target).value();
    }
  }
  read_standby_wait(database, out.wait_for_standby);
}

void read_broker(MapReader& root, BrokerConfig& out) {
  MapReader broker = root.section("broker");
  read_broker_urls(broker, out);
  broker.choice<BrokerProfile>("profile", out.profile, kBrokerProfiles);
  if (broker.nonempty_text("username", out.username) && has_control_characters(out.username)) {
    broker.report("username", "must not contain control characters");
  }
  read_password(broker, out.password, out.password_file);
  read_sasl_mechanisms(broker, out.sasl_mechanisms);
  broker.boolean("allow_insecure_plain", out.allow_insecure_plain);
  read_tls(broker, out.tls);
  if (broker.nonempty_text("container_id", out.container_id) &&
      (out.container_id.size() > kMaxIdBytes || has_control_characters(out.container_id))) {
    broker.report("container_id", "must be at most 256 bytes without control characters");
  }
  broker.millis("idle_timeout_ms", out.idle_timeout, kIdleTimeoutMs);
  broker.millis("link_idle_close_ms", out.link_idle_close, kLinkIdleCloseMs);
  broker.millis("reconnect_min_ms", out.reconnect_min, kReconnectMinMs);
  broker.millis("reconnect_max_ms", out.reconnect_max, kReconnectMaxMs);
  broker.millis("outcome_timeout_ms", out.outcome_timeout, kOutcomeTimeoutMs);
  read_cloudevents(broker, out.cloudevents);
}

}  // namespace outboxd::config
