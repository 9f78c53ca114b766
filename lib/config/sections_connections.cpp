// The custom readers of the database and broker keys: URLs, credentials, SASL, TLS files, names.
#include <algorithm>

#include "config/scalar.hpp"
#include "config/secrets.hpp"
#include "config/sections.hpp"
#include "config/url.hpp"

namespace outboxd::config {
namespace {

constexpr std::size_t kMaxIdBytes = 256;

std::string upper(std::string text) {
  for (char& c : text) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return text;
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
  if (has_password) {
    out = std::move(password);
    file_out.clear();  // an outbox's own password over a password_file of database:'s
  }
  if (!has_file) return;
  auto content = read_secret_file(file, written);
  if (!content) {
    section.report("password_file", content.error().message);
    return;
  }
  out = std::move(content).value();
  file_out = std::move(file);
}

void read_sasl_mechanisms(MapReader& broker, std::string_view key, std::vector<std::string>& out, Config&) {
  const auto items = broker.list(key);
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

void read_tls_file(MapReader& tls, std::string_view key, std::string& out, Config&) {
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

// none | any | a standby's application_name, which PostgreSQL keeps to
// NAMEDATALEN - 1 = 63 bytes of printable ASCII (it shows other bytes as '?',
// so such a name could never match).
void read_standby_wait(MapReader& database, std::string_view key, StandbyWait& out, Config&) {
  std::string value;
  if (!database.nonempty_text(key, value)) return;
  if (value == "none") {
    out = {};
  } else if (value == "any") {
    out = {StandbyWait::Mode::any, {}};
  } else if (value.size() > 63 ||
             !std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c < 0x7f; })) {
    database.report(key,
                    "must be none, any, or a standby's application_name (at most 63 printable ASCII characters)");
  } else {
    out = {StandbyWait::Mode::named, std::move(value)};
  }
}

// One broker (url, required unless urls is given) or the nodes of a cluster
// (urls), never both: which one the publisher would use must not be a guess.
void read_broker_urls(MapReader& broker, std::string_view key, std::string& url, Config& config) {
  BrokerConfig& out = config.broker;
  if (!broker.given("urls")) {
    if (!broker.required_text(key, url)) return;
    auto endpoint = parse_amqp_url(url);
    if (!endpoint) return (void)broker.report(key, endpoint.error().message);
    out.endpoints = {std::move(endpoint).value()};
  } else if (std::string ignored; broker.text(key, ignored)) {
    broker.report("urls", "give either url (one broker) or urls (the nodes of a cluster), not both");
    (void)broker.list("urls");  // known, so not reported as unknown too
  } else if (const auto items = broker.list("urls"); items && items->empty()) {
    broker.report("urls", "must list at least one broker url");
  } else if (items) {
    read_broker_url_list(broker, *items, out);
  }
  if (!out.endpoints.empty()) out.tls.enabled = out.endpoints.front().tls;
}

// Required in the one-outbox form. In the many-outbox form database: holds
// defaults, and validate.cpp checks that every outbox ends with a url.
void read_database_url(MapReader& database, std::string_view key, std::string& out, Config& config) {
  if (database.many_outboxes() && !database.given(key)) {
    (void)database.text(key, out);  // known, so an empty value is no unknown key
    return;
  }
  if (!database.required_text(key, out)) return;
  auto target = parse_pg_url(out);
  if (target) config.database.target = std::move(target).value();
  else database.report(key, target.error().message);
}

// After pooler, which it depends on.
void read_listen_url(MapReader& database, std::string_view key, std::string& out, Config& config) {
  if (!database.nonempty_text(key, out)) return;
  auto target = parse_pg_url(out);
  if (!target) {
    database.report(key, target.error().message);
  } else if (config.database.pooler != Pooler::transaction) {
    // With no pooler or a pooler in session mode the main connection LISTENs itself.
    database.report(key, "is only used with pooler: transaction");
  } else {
    config.database.listen_target = std::move(target).value();
  }
}

void read_broker_username(MapReader& broker, std::string_view key, std::string& out, Config&) {
  if (broker.nonempty_text(key, out) && has_control_characters(out)) {
    broker.report(key, "must not contain control characters");
  }
}

void read_container_id(MapReader& broker, std::string_view key, std::string& out, Config&) {
  if (broker.nonempty_text(key, out) && (out.size() > kMaxIdBytes || has_control_characters(out))) {
    broker.report(key, "must be at most 256 bytes without control characters");
  }
}

}  // namespace outboxd::config
