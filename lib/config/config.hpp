// The daemon's configuration as plain structs with defaults; each key's row is in key_table.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outboxd::config {

using std::chrono::milliseconds;

enum class BrokerProfile { generic, rabbitmq, activemq, artemis, azure_servicebus };
enum class RetentionMode { delete_rows, keep };
enum class LogFormat { human, json };
// What sits between the daemon and PostgreSQL; see database.pooler in config/outboxd.yaml.
enum class Pooler { none, session, transaction };

struct TlsConfig {
  bool enabled = false;           // true for amqps:// URLs
  std::string ca_file;            // empty: system trust store
  std::string cert_file;          // client certificate (EXTERNAL)
  std::string key_file;
  bool verify_host = true;

  bool operator==(const TlsConfig&) const = default;
};

// A libpq connection string as libpq itself parses it (PQconninfoParse): the
// config parses database.url once and lib/pg connects with these keywords.
struct PgTarget {
  std::vector<std::pair<std::string, std::string>> options;  // every keyword the string sets, password included

  // The keyword's value, empty when the string does not set it.
  std::string get(std::string_view keyword) const;

  bool operator==(const PgTarget&) const = default;
};

// broker.url, parsed by the config; lib/amqp connects to it.
struct AmqpEndpoint {
  bool tls = false;  // amqps://
  std::string host;  // without IPv6 brackets
  int port = 0;      // the scheme's default (5672 / 5671) when the URL names none

  bool operator==(const AmqpEndpoint&) const = default;
};

// broker.cloudevents: rows published as CloudEvents in the AMQP binding's
// binary content mode (docs/cloudevents.md).
struct CloudEventsConfig {
  bool enabled = false;
  std::string source;                     // URI-reference; required when enabled
  std::vector<std::string> destinations;  // empty: every destination
  std::string default_type;               // type of a row without subject; empty: such a row parks
  std::string property_prefix = "cloudEvents:";  // or "cloudEvents_" for JMS consumers

  // Whether a row for `destination` is published as a CloudEvent.
  bool applies_to(std::string_view destination) const;

  bool operator==(const CloudEventsConfig&) const = default;
};

// database.wait_for_standby: publish a claimed row only once a standby has
// flushed the WAL of its commit, so that a failover never loses a published row.
struct StandbyWait {
  enum class Mode { none, any, named };
  Mode mode = Mode::none;
  std::string application_name;  // Mode::named: the standby's primary_conninfo application_name

  // The standby the database is asked about: its name, or none for the most advanced that reports.
  std::optional<std::string> named() const {
    if (mode == Mode::named) return application_name;
    return std::nullopt;
  }

  bool operator==(const StandbyWait&) const = default;
};

struct DatabaseConfig {
  std::string url;                // libpq URI or conninfo (required); shown only redacted
  PgTarget target;                // url, parsed
  std::string password;           // from password or password_file; never logged
  std::string password_file;      // resolved path, read again at every connect; empty: none
  milliseconds connect_timeout{5000};
  milliseconds statement_timeout{30000};
  milliseconds reconnect_min{100};
  milliseconds reconnect_max{10000};
  Pooler pooler = Pooler::none;
  std::string listen_url;         // direct to PostgreSQL for LISTEN (pooler transaction); empty: poll
  PgTarget listen_target;         // listen_url, parsed
  StandbyWait wait_for_standby;

  bool operator==(const DatabaseConfig&) const = default;
};

struct BrokerConfig {
  // Exactly one of url and urls is given: one broker, or the nodes of a
  // cluster tried in order (failover). All amqp:// or all amqps://.
  std::string url;                // amqp://host:port or amqps://host:port; empty when urls is given
  std::vector<std::string> urls;  // as written; empty when url is given
  std::vector<AmqpEndpoint> endpoints;  // url's or urls', parsed, in order: at least one once loaded
  BrokerProfile profile = BrokerProfile::generic;
  std::string username;           // empty: ANONYMOUS
  std::string password;           // from password or password_file; never logged
  std::string password_file;      // resolved path, read again at every connect; empty: none
  // As written, or the config's default: PLAIN with a username, else ANONYMOUS.
  // Decided and checked by the config; lib/amqp offers exactly these.
  std::vector<std::string> sasl_mechanisms;
  bool allow_insecure_plain = false;         // silence the PLAIN-over-TCP warning
  TlsConfig tls;
  std::string container_id;       // empty: derived from the instance id
  milliseconds idle_timeout{30000};          // AMQP heartbeat
  milliseconds link_idle_close{60000};       // close a destination's link when unused this long
  milliseconds reconnect_min{100};
  milliseconds reconnect_max{10000};
  milliseconds outcome_timeout{30000};       // no outcome by then: treat as unknown
  CloudEventsConfig cloudevents;

  bool operator==(const BrokerConfig&) const = default;
};

struct OutboxConfig {
  std::string schema = "outbox";
  std::string workflow_schema = "workflow";
  int partitions = 64;            // used by `migrate` when it creates the schema

  bool operator==(const OutboxConfig&) const = default;
};

struct DispatchConfig {
  int batch_size = 1000;          // rows per claim and per mark
  int in_flight = 1000;           // deliveries awaiting an outcome, all destinations
  int per_session_in_flight = 1;  // 1 = strict per-session order
  int max_attempts = 10;          // rejects before a row is parked
  milliseconds backoff_initial{1000};
  milliseconds backoff_max{300000};
  double backoff_multiplier = 2.0;
  double backoff_jitter = 0.2;    // +-20% of each delay
  milliseconds release_retry{1000};          // delay after released/modified/unknown
  int releases_per_attempt = 5;   // this many releases in a row count as one failed attempt
  milliseconds poll_interval{30000};         // fallback poll when no NOTIFY arrives
  int notify_max_rate = 500;                 // rows/s: above it writers stop NOTIFYing, the daemon polls
  milliseconds busy_poll{3};                 // claim interval while polling
  milliseconds shutdown_timeout{10000};      // wait for in-flight outcomes on SIGTERM
  milliseconds stats_interval{10000};        // info log of rates
  int max_message_bytes = 0;      // larger rows are parked unsent; 0: the broker profile's limit
  int claim_bytes = 16 << 20;     // payload bytes one claim reads (at least one row)
  int in_flight_bytes = 64 << 20; // payload bytes held, buffered and in flight (at least one row)

  bool operator==(const DispatchConfig&) const = default;
};

// A destination's delivery policy (destinations:), by its name as rows write it.
struct DestinationEntry {
  std::string name;
  int priority = 0;             // a higher class goes first
  double max_rate = 0;          // rows per second; 0: none
  double burst = 0;             // rows let out at once; 0: a tenth of a second of max_rate
  int max_in_flight = 0;        // 0: only dispatch.in_flight

  bool operator==(const DestinationEntry&) const = default;
};

struct RetentionConfig {
  RetentionMode mode = RetentionMode::delete_rows;
  milliseconds keep_for{std::chrono::hours(24 * 7)};  // mode keep: purge after this
  // Cancelled rows (skipped or cancelled by writers) and row events, whatever the mode.
  milliseconds failed_keep_for{std::chrono::hours(24 * 7)};
  int purge_batch = 1000;
  milliseconds purge_interval{60000};

  bool operator==(const RetentionConfig&) const = default;
};

struct LeaseConfig {
  std::string instance_id;        // empty: host name + pid
  milliseconds lease_ttl{30000};
  milliseconds renew_interval{10000};
  milliseconds safety_margin{5000};          // stop publishing this long before expiry

  bool operator==(const LeaseConfig&) const = default;
};

struct LogConfig {
  std::string level = "info";     // trace debug info warn error critical off
  LogFormat format = LogFormat::human;

  bool operator==(const LogConfig&) const = default;
};

struct HttpConfig {
  std::string listen;             // host:port for /metrics /healthz /readyz; empty: off
  milliseconds backlog_interval{5000};       // backlog figures of /metrics; 0: off

  bool operator==(const HttpConfig&) const = default;
};

// `outboxd console`, the operators' web view; `run` reads none of it.
struct ConsoleConfig {
  std::string listen = "127.0.0.1:9189";  // host:port; --listen overrides
  std::string token_file;         // resolved path of the login token; read at start, never logged
  bool allow_plain_http = false;  // serve a non-loopback address without TLS (warned)
  bool behind_tls = false;        // reached through a TLS proxy: the login cookie is __Host- and Secure
  milliseconds sample_interval{10000};  // backlog samples for the charts of /

  bool operator==(const ConsoleConfig&) const = default;
};

// One outbox of many: an item of `outboxes:` or a row of the catalog's query.
// Its sections are the top-level database: and outbox: with its own keys over them.
struct OutboxEntry {
  std::string name;               // [A-Za-z0-9_.-], 1..63 characters, unique: logs, metrics, status, message stamps
  DatabaseConfig database;
  OutboxConfig outbox;

  bool operator==(const OutboxEntry&) const = default;
};

// Where more outboxes are found: a query against a catalog database.
struct CatalogConfig {
  DatabaseConfig database;        // the top-level database: with tenants.catalog.database's keys over it
  std::string query;              // columns name, url (NULL: database.url), schema (NULL: outbox.schema); empty: none
  milliseconds refresh_interval{60000};

  bool operator==(const CatalogConfig&) const = default;
};

// How one daemon serves many outboxes: its connection budget, when an idle
// outbox gives its connection back and how often one no listener hears is checked.
struct TenantsConfig {
  int max_connections = 16;       // PostgreSQL connections across every outbox, listeners and checks included
  milliseconds idle_check_interval{5000};  // an idle outbox no LISTEN hears is checked this often
  milliseconds release_after{10000};       // an outbox with nothing to do gives its connection back after this
  CatalogConfig catalog;

  bool operator==(const TenantsConfig&) const = default;
};

struct Config {
  std::string source;             // file the config came from
  DatabaseConfig database;
  BrokerConfig broker;
  OutboxConfig outbox;
  DispatchConfig dispatch;
  std::vector<DestinationEntry> destinations;  // policies of named destinations; others: priority 0, no limits
  RetentionConfig retention;
  LeaseConfig leases;
  LogConfig log;
  HttpConfig http;
  ConsoleConfig console;
  std::vector<OutboxEntry> outboxes;  // empty: the one outbox of database: and outbox:
  TenantsConfig tenants;

  // Whether the daemon serves outboxes of a list or a catalog instead of the one of database: and outbox:.
  bool many_outboxes() const { return !outboxes.empty() || !tenants.catalog.query.empty(); }

  bool operator==(const Config&) const = default;
};

// The names used in the YAML file ("azure-servicebus", "delete", "json").
const char* to_string(BrokerProfile profile);
const char* to_string(RetentionMode mode);
const char* to_string(LogFormat format);
const char* to_string(Pooler pooler);

// The largest message a row may make: dispatch.max_message_bytes, or when
// that is not set the limit of the broker profile's default configuration.
int profile_max_message_bytes(BrokerProfile profile);
int max_message_bytes(const Config& config);

// The SASL mechanisms to offer: broker.sasl_mechanisms, or when that is empty
// (a BrokerConfig not from the loader) PLAIN with a username, ANONYMOUS without.
std::vector<std::string> sasl_mechanisms_of(const BrokerConfig& broker);

}  // namespace outboxd::config
