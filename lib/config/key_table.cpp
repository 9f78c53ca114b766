// The table of every config key: the loader walks it, plan_reload compares by it, the docs' key table is made from it.
//
// To add a key:
//   1. its member, with its default, in config.hpp;
//   2. one row below, where the key sits in config/outboxd.yaml (rows of one
//      section stay together, in the file's order): the path, the member,
//      whether SIGHUP applies it (`applied` only if the daemon reads it afresh
//      or is told), the rule (Int, Millis, Seconds, Real, Flag, Words, Choice,
//      or Custom with a reader in sections_*.cpp when a range is not enough),
//      and the help line;
//   3. its use: in the run loop, the `Settings` of the part that reads it
//      (`settings_of()` in daemon/run/*_step.cpp, decision_writer.cpp,
//      reporting.cpp), or `planner_policy()` in daemon/run/run_loop.cpp for
//      the planner's; and its documented line in config/outboxd.yaml;
//   4. regenerate docs/configuration.md: OUTBOXD_WRITE_DOCS=1 build/tests/unit_tests '[keys]'.
// The unit tests ([keys], [example], [reload]) fail until 3 and 4 agree with the row.
// Rules between keys (min <= max, lease arithmetic, SASL, TLS) stay in validate.cpp and sasl.cpp.
#include "config/key_table.hpp"

#include "config/sections.hpp"

namespace outboxd::config {
namespace {

constexpr auto applied = Reload::applied;
constexpr auto restart = Reload::restart;
constexpr std::int64_t kMaxInt = INT32_MAX;

// Database and broker: connections; a change to any of them needs a restart
// (wait_for_standby excepted: each claim reads it).
void add_connection_keys(std::vector<KeySpec>& t) {
  t.push_back(key<&Config::database, &DatabaseConfig::url>(
      "database.url", restart,
      Custom<std::string>{read_database_url, "libpq URI or conninfo (required with one outbox)"},
      "the PostgreSQL to dispatch from"));
  t.push_back(password_key<&Config::database>("database.password", "password, if url carries none"));
  t.push_back(password_file_key<&Config::database>("database.password_file", "file holding the password"));
  t.push_back(key<&Config::database, &DatabaseConfig::connect_timeout>(
      "database.connect_timeout_ms", restart, Millis{100, 600'000}, "give up a connection attempt to one host"));
  t.push_back(key<&Config::database, &DatabaseConfig::statement_timeout>(
      "database.statement_timeout_ms", restart, Millis{0, 86'400'000},  // 0: no limit, as in PostgreSQL
      "statement_timeout of the daemon's statements; 0: none"));
  t.push_back(key<&Config::database, &DatabaseConfig::reconnect_min>(
      "database.reconnect_min_ms", restart, Millis{1, 600'000}, "first reconnect delay"));
  t.push_back(key<&Config::database, &DatabaseConfig::reconnect_max>(
      "database.reconnect_max_ms", restart, Millis{1, 3'600'000}, "longest reconnect delay"));
  t.push_back(key<&Config::database, &DatabaseConfig::pooler>(
      "database.pooler", restart, Choice<Pooler>{kPoolers}, "what url points at: PostgreSQL or a pooler's mode"));
  t.push_back(key<&Config::database, &DatabaseConfig::listen_url>(
      "database.listen_url", restart, Custom<std::string>{read_listen_url, "libpq URI or conninfo"},
      "pooler transaction only: PostgreSQL itself, for LISTEN"));
  t.push_back(key<&Config::database, &DatabaseConfig::wait_for_standby>(
      "database.wait_for_standby", applied, Custom<StandbyWait>{read_standby_wait, "none, any, or an application_name"},
      "publish a row only once this standby has flushed it"));

  t.push_back(key<&Config::broker, &BrokerConfig::url>(
      "broker.url", restart, Custom<std::string>{read_broker_urls, "amqp://host:port or amqps://host:port"},
      "the broker (required unless urls is given)"));
  t.push_back(key<&Config::broker, &BrokerConfig::urls>(
      "broker.urls", restart, ReadBefore{"list of broker urls"},
      "the nodes of a cluster, tried in turn; instead of url"));
  t.push_back(key<&Config::broker, &BrokerConfig::profile>(
      "broker.profile", restart, Choice<BrokerProfile>{kBrokerProfiles}, "how a destination becomes a link target"));
  t.push_back(key<&Config::broker, &BrokerConfig::username>(
      "broker.username", restart, Custom<std::string>{read_broker_username, "text"}, "SASL user; none: ANONYMOUS"));
  t.push_back(password_key<&Config::broker>("broker.password", "SASL password"));
  t.push_back(password_file_key<&Config::broker>("broker.password_file", "file holding the SASL password"));
  t.push_back(key<&Config::broker, &BrokerConfig::sasl_mechanisms>(
      "broker.sasl_mechanisms", restart,
      Custom<std::vector<std::string>>{read_sasl_mechanisms, "list of PLAIN, EXTERNAL, ANONYMOUS"},
      "mechanisms to offer; empty: PLAIN with a username, else ANONYMOUS"));
  t.push_back(key<&Config::broker, &BrokerConfig::allow_insecure_plain>(
      "broker.allow_insecure_plain", restart, Flag{}, "silence the PLAIN-over-TCP warning"));
  t.push_back(key<&Config::broker, &BrokerConfig::tls, &TlsConfig::ca_file>(
      "broker.tls.ca_file", restart, Custom<std::string>{read_tls_file, "path of a readable file"},
      "CA bundle; none: the system trust store"));
  t.push_back(key<&Config::broker, &BrokerConfig::tls, &TlsConfig::cert_file>(
      "broker.tls.cert_file", restart, Custom<std::string>{read_tls_file, "path of a readable file"},
      "client certificate (EXTERNAL)"));
  t.push_back(key<&Config::broker, &BrokerConfig::tls, &TlsConfig::key_file>(
      "broker.tls.key_file", restart, Custom<std::string>{read_tls_file, "path of a readable file"},
      "client certificate's key"));
  t.push_back(key<&Config::broker, &BrokerConfig::tls, &TlsConfig::verify_host>(
      "broker.tls.verify_host", restart, Flag{}, "check that the certificate names the host"));
  t.push_back(key<&Config::broker, &BrokerConfig::container_id>(
      "broker.container_id", restart, Custom<std::string>{read_container_id, "text, at most 256 bytes"},
      "AMQP container id; none: from leases.instance_id"));
  t.push_back(key<&Config::broker, &BrokerConfig::idle_timeout>(
      "broker.idle_timeout_ms", restart, Millis{0, 3'600'000},
      "connection lost after this long silent; 0: no heartbeats"));
  t.push_back(key<&Config::broker, &BrokerConfig::link_idle_close>(
      "broker.link_idle_close_ms", restart, Millis{0, 86'400'000}, "close an unused destination's link; 0: never"));
  t.push_back(key<&Config::broker, &BrokerConfig::reconnect_min>(
      "broker.reconnect_min_ms", restart, Millis{1, 600'000}, "first reconnect delay"));
  t.push_back(key<&Config::broker, &BrokerConfig::reconnect_max>(
      "broker.reconnect_max_ms", restart, Millis{1, 3'600'000}, "longest reconnect delay"));
  t.push_back(key<&Config::broker, &BrokerConfig::outcome_timeout>(
      "broker.outcome_timeout_ms", restart, Millis{100, 3'600'000}, "no outcome by then: unknown, published again"));
}

// broker.cloudevents: the publisher's encoder takes them at start.
void add_cloudevents_keys(std::vector<KeySpec>& t) {
  t.push_back(key<&Config::broker, &BrokerConfig::cloudevents, &CloudEventsConfig::enabled>(
      "broker.cloudevents.enabled", restart, Flag{}, "publish rows as CloudEvents (binary content mode)"));
  t.push_back(key<&Config::broker, &BrokerConfig::cloudevents, &CloudEventsConfig::source>(
      "broker.cloudevents.source", restart, Custom<std::string>{read_cloudevents_source, "URI-reference"},
      "the events' source; required when enabled"));
  t.push_back(key<&Config::broker, &BrokerConfig::cloudevents, &CloudEventsConfig::destinations>(
      "broker.cloudevents.destinations", restart,
      Custom<std::vector<std::string>>{read_cloudevents_destinations, "list of destinations"},
      "only these destinations; empty: every one"));
  t.push_back(key<&Config::broker, &BrokerConfig::cloudevents, &CloudEventsConfig::default_type>(
      "broker.cloudevents.default_type", restart, Custom<std::string>{read_cloudevents_default_type, "text"},
      "type of a row without subject; none: such a row parks"));
  t.push_back(key<&Config::broker, &BrokerConfig::cloudevents, &CloudEventsConfig::property_prefix>(
      "broker.cloudevents.property_prefix", restart, Words{kCloudEventsPrefixes}, "application property prefix"));
}

// The loop reads dispatch and retention afresh, except what changes the order
// guarantee under rows in flight (per_session_in_flight) or the writers'
// NOTIFY contract (notify_max_rate, busy_poll_ms).
void add_runtime_keys(std::vector<KeySpec>& t) {
  t.push_back(key<&Config::outbox, &OutboxConfig::schema>(
      "outbox.schema", restart, Custom<std::string>{read_outbox_schema, "SQL identifier, at most 52 bytes"},
      "schema of the outbox"));
  t.push_back(key<&Config::outbox, &OutboxConfig::workflow_schema>(
      "outbox.workflow_schema", restart, Custom<std::string>{read_workflow_schema, "SQL identifier"},
      "schema of the workflow state records"));
  t.push_back(key<&Config::outbox, &OutboxConfig::partitions>(
      "outbox.partitions", restart, Int{1, 4096}, "partitions `migrate` creates"));

  t.push_back(key<&Config::dispatch, &DispatchConfig::batch_size>(
      "dispatch.batch_size", applied, Int{1, 10'000}, "rows per claim and per mark"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::in_flight>(
      "dispatch.in_flight", applied, Int{1, 100'000}, "deliveries awaiting an outcome, all destinations"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::per_session_in_flight>(
      "dispatch.per_session_in_flight", restart, Int{1, 100'000}, "deliveries in flight per session; 1: strict order"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::max_attempts>(
      "dispatch.max_attempts", applied, Int{1, kMaxInt}, "rejects before a row is parked"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::backoff_initial>(
      "dispatch.backoff_initial_ms", applied, Millis{1, 86'400'000}, "first retry delay"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::backoff_max>(
      "dispatch.backoff_max_ms", applied, Millis{1, 86'400'000}, "longest retry delay"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::backoff_multiplier>(
      "dispatch.backoff_multiplier", applied, Real{1.0, 100.0}, "each retry delay times this"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::backoff_jitter>(
      "dispatch.backoff_jitter", applied, Real{0.0, 1.0}, "each delay varied by up to this share"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::release_retry>(
      "dispatch.release_retry_ms", applied, Millis{0, 3'600'000}, "delay after released, modified or unknown"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::releases_per_attempt>(
      "dispatch.releases_per_attempt", applied, Int{1, kMaxInt}, "releases in a row that count as one attempt"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::poll_interval>(
      "dispatch.poll_interval_ms", applied, Millis{10, 3'600'000}, "fallback poll when no NOTIFY arrives"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::notify_max_rate>(
      "dispatch.notify_max_rate", restart, Int{1, 1'000'000}, "rows/s above which writers stop NOTIFYing"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::busy_poll>(
      "dispatch.busy_poll_ms", restart, Millis{1, 1000}, "claim interval while polling"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::shutdown_timeout>(
      "dispatch.shutdown_timeout_ms", applied, Millis{0, 3'600'000}, "wait for outcomes on SIGTERM"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::stats_interval>(
      "dispatch.stats_interval_ms", applied, Millis{0, 86'400'000}, "info log of rates; 0: none"));
  // Above the 8 KiB kept for properties; up to 1 GiB.
  t.push_back(key<&Config::dispatch, &DispatchConfig::max_message_bytes>(
      "dispatch.max_message_bytes", applied, Int{16 << 10, 1 << 30},
      "larger rows are parked unsent; none: the profile's limit"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::claim_bytes>(
      "dispatch.claim_bytes", applied, Int{64 << 10, 1 << 30}, "payload bytes one claim reads"));
  t.push_back(key<&Config::dispatch, &DispatchConfig::in_flight_bytes>(
      "dispatch.in_flight_bytes", applied, Int{64 << 10, 1 << 30}, "payload bytes held and in flight"));
  t.push_back(key<&Config::destinations>(
      "destinations", applied,
      Custom<std::vector<DestinationEntry>>{read_destinations,
                                            "list of name, priority, max_rate, burst, max_in_flight"},
      "delivery policy of named destinations; others: priority 0, no limits"));

  t.push_back(key<&Config::retention, &RetentionConfig::mode>(
      "retention.mode", applied, Choice<RetentionMode>{kRetentionModes},
      "delete sent rows, or keep them for keep_for_s"));
  t.push_back(key<&Config::retention, &RetentionConfig::keep_for>(
      "retention.keep_for_s", applied, Seconds{0, 315'360'000}, "mode keep: purge sent rows after this"));
  // At least an hour: outbox.purge_row_events() keeps that much of the trail.
  t.push_back(key<&Config::retention, &RetentionConfig::failed_keep_for>(
      "retention.failed_keep_for_s", applied, Seconds{3600, 315'360'000},
      "purge cancelled rows and row events after this"));
  t.push_back(key<&Config::retention, &RetentionConfig::purge_batch>(
      "retention.purge_batch", applied, Int{1, 100'000}, "rows per purge statement"));
  t.push_back(key<&Config::retention, &RetentionConfig::purge_interval>(
      "retention.purge_interval_ms", applied, Millis{100, 86'400'000}, "time between purges"));

  t.push_back(key<&Config::leases, &LeaseConfig::instance_id>(
      "leases.instance_id", restart, Custom<std::string>{read_instance_id, "text, at most 128 bytes"},
      "this instance's name; none: host name and pid"));
  t.push_back(key<&Config::leases, &LeaseConfig::lease_ttl>(
      "leases.lease_ttl_ms", restart, Millis{1000, 3'600'000}, "a partition's lease lasts this long"));
  t.push_back(key<&Config::leases, &LeaseConfig::renew_interval>(
      "leases.renew_interval_ms", restart, Millis{100, 3'600'000}, "renew leases this often"));
  t.push_back(key<&Config::leases, &LeaseConfig::safety_margin>(
      "leases.safety_margin_ms", restart, Millis{0, 3'600'000}, "stop publishing this long before expiry"));

  t.push_back(key<&Config::log, &LogConfig::level>("log.level", applied, Words{kLogLevels}, "least severity logged"));
  t.push_back(key<&Config::log, &LogConfig::format>("log.format", applied, Choice<LogFormat>{kLogFormats},
                                                    "one line per entry, for people or as JSON"));

  t.push_back(key<&Config::http, &HttpConfig::listen>(
      "http.listen", restart, Custom<std::string>{read_http_listen, "host:port, or empty"},
      "/metrics /healthz /readyz; empty: off"));
  t.push_back(key<&Config::http, &HttpConfig::backlog_interval>(
      "http.backlog_interval_ms", applied, Millis{0, 86'400'000}, "backlog figures of /metrics; 0: off"));

  // Read by `outboxd console` alone, at its start: `run` adopts a change
  // without a restart and without effect; the docs say when it applies.
  t.push_back(key<&Config::console, &ConsoleConfig::listen>(
      "console.listen", applied, Custom<std::string>{read_console_listen, "host:port"},
      "where `outboxd console` serves; --listen overrides"));
  t.push_back(key<&Config::console, &ConsoleConfig::token_file>(
      "console.token_file", applied, Custom<std::string>{read_console_token_file, "path of a readable file"},
      "the console's login and Bearer token (required by `outboxd console`)"));
  t.push_back(key<&Config::console, &ConsoleConfig::allow_plain_http>(
      "console.allow_plain_http", applied, Flag{}, "serve a non-loopback console.listen over plain HTTP"));
  t.push_back(key<&Config::console, &ConsoleConfig::behind_tls>(
      "console.behind_tls", applied, Flag{}, "reached through HTTPS: the login cookie is Secure and __Host-"));
  t.push_back(key<&Config::console, &ConsoleConfig::sample_interval>(
      "console.sample_interval_ms", applied, Millis{1000, 3'600'000}, "backlog samples for the console's charts"));
  for (auto row = t.end() - 5; row != t.end(); ++row) row->on_reload = "console start";
}

// A row whose change is applied unless it moves the daemon between one
// outbox and many, which only a restart does.
KeySpec restart_between_forms(KeySpec row) {
  row.on_reload = "applied; between one outbox and many: restart";
  row.compare = [same = row.compare](const Config& running, const Config& loaded) {
    const Change change = same(running, loaded);
    if (change == Change::none || running.many_outboxes() == loaded.many_outboxes()) return change;
    return Change::needs_restart;
  };
  return row;
}

// Many outboxes in one daemon. The daemon reads the list and the catalog
// again on SIGHUP and starts and stops outboxes to match; the connection
// budget and its timings are set at start.
void add_outboxes_keys(std::vector<KeySpec>& t) {
  t.push_back(restart_between_forms(key<&Config::outboxes>(
      "outboxes", applied, Custom<std::vector<OutboxEntry>>{read_outboxes, "list of name, database:, outbox:"},
      "the outboxes served, each database:'s and outbox:'s keys over theirs; none: the one outbox of those")));
  t.push_back(key<&Config::tenants, &TenantsConfig::max_connections>(
      "tenants.max_connections", restart, Int{2, 10'000},
      "PostgreSQL connections across every outbox, the catalog's included"));
  t.push_back(key<&Config::tenants, &TenantsConfig::idle_check_interval>(
      "tenants.idle_check_interval_ms", restart, Millis{100, 3'600'000},
      "how often an idle outbox that no LISTEN hears is checked for due rows"));
  t.push_back(key<&Config::tenants, &TenantsConfig::release_after>(
      "tenants.release_after_ms", restart, Millis{100, 86'400'000},
      "an outbox with nothing to do gives its connection back after this"));
  t.push_back(restart_between_forms(key<&Config::tenants, &TenantsConfig::catalog, &CatalogConfig::query>(
      "tenants.catalog.query", applied,
      Custom<std::string>{read_catalog_query, "SQL: a SELECT of name, and as needed url, schema, workflow_schema"},
      "more outboxes, one a row; none: the list alone")));
  t.push_back(key<&Config::tenants, &TenantsConfig::catalog, &CatalogConfig::database>(
      "tenants.catalog.database", applied, Custom<DatabaseConfig>{read_catalog_database, "any key of database:"},
      "where the query runs: database: with these keys over it"));
  t.push_back(key<&Config::tenants, &TenantsConfig::catalog, &CatalogConfig::refresh_interval>(
      "tenants.catalog.refresh_interval_ms", applied, Millis{1000, 86'400'000},
      "read the catalog again this often (and on SIGHUP)"));
}

}  // namespace

const std::vector<KeySpec>& key_table() {
  static const std::vector<KeySpec> table = [] {
    std::vector<KeySpec> t;
    add_connection_keys(t);
    add_cloudevents_keys(t);
    add_runtime_keys(t);
    add_outboxes_keys(t);
    return t;
  }();
  return table;
}

}  // namespace outboxd::config
