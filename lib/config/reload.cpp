// The table of keys a reload compares, each either applied at run time or left for a restart.
#include "config/reload.hpp"

#include <functional>

namespace outboxd::config {
namespace {

enum class Change { none, applied, needs_restart };

// One key: how a change to it is classified, and how it is adopted when applied.
struct Key {
  const char* path;
  std::function<Change(const Config& running, const Config& loaded)> compare;
  std::function<void(Config& to, const Config& from)> adopt;
};

template <auto Section, auto Member>
Key key(const char* path, bool reloadable) {
  return {path,
          [reloadable](const Config& running, const Config& loaded) {
            if (running.*Section.*Member == loaded.*Section.*Member) return Change::none;
            return reloadable ? Change::applied : Change::needs_restart;
          },
          [](Config& to, const Config& from) { to.*Section.*Member = from.*Section.*Member; }};
}

template <auto Section, auto Member>
Key applied(const char* path) {
  return key<Section, Member>(path, true);
}

template <auto Section, auto Member>
Key restart(const char* path) {
  return key<Section, Member>(path, false);
}

// An inline password lives in the running process only: a change needs a restart.
template <auto Section>
Key inline_password(const char* path) {
  return {path,
          [](const Config& running, const Config& loaded) {
            const auto& was = running.*Section;
            const auto& now = loaded.*Section;
            const bool inline_both = was.password_file.empty() && now.password_file.empty();
            return inline_both && was.password != now.password ? Change::needs_restart : Change::none;
          },
          [](Config&, const Config&) {}};
}

// A password_file is read again at every connect: new contents at the same
// path apply by themselves (adopted here only to keep the copy current); a
// new path needs a restart.
template <auto Section>
Key password_file(const char* path) {
  return {path,
          [](const Config& running, const Config& loaded) {
            const auto& was = running.*Section;
            const auto& now = loaded.*Section;
            if (was.password_file != now.password_file) return Change::needs_restart;
            return !now.password_file.empty() && was.password != now.password ? Change::applied : Change::none;
          },
          [](Config& to, const Config& from) { (to.*Section).password = (from.*Section).password; }};
}

// Every key of the file, in its order. A key is applied only where the loop
// reads it afresh each time (or is told, like the planner and the logger);
// per_session_in_flight changes the order guarantee under rows in flight and
// notify_max_rate/busy_poll_ms the writers' NOTIFY contract, so they restart.
const std::vector<Key>& keys() {
  static const std::vector<Key> table{
      restart<&Config::database, &DatabaseConfig::url>("database.url"),
      inline_password<&Config::database>("database.password"),
      password_file<&Config::database>("database.password_file"),
      restart<&Config::database, &DatabaseConfig::connect_timeout>("database.connect_timeout_ms"),
      restart<&Config::database, &DatabaseConfig::statement_timeout>("database.statement_timeout_ms"),
      restart<&Config::database, &DatabaseConfig::reconnect_min>("database.reconnect_min_ms"),
      restart<&Config::database, &DatabaseConfig::reconnect_max>("database.reconnect_max_ms"),
      restart<&Config::database, &DatabaseConfig::pooler>("database.pooler"),
      restart<&Config::database, &DatabaseConfig::listen_url>("database.listen_url"),
      applied<&Config::database, &DatabaseConfig::wait_for_standby>("database.wait_for_standby"),
      restart<&Config::broker, &BrokerConfig::url>("broker.url"),
      restart<&Config::broker, &BrokerConfig::urls>("broker.urls"),
      restart<&Config::broker, &BrokerConfig::profile>("broker.profile"),
      restart<&Config::broker, &BrokerConfig::username>("broker.username"),
      inline_password<&Config::broker>("broker.password"),
      password_file<&Config::broker>("broker.password_file"),
      restart<&Config::broker, &BrokerConfig::sasl_mechanisms>("broker.sasl_mechanisms"),
      restart<&Config::broker, &BrokerConfig::allow_insecure_plain>("broker.allow_insecure_plain"),
      restart<&Config::broker, &BrokerConfig::tls>("broker.tls"),
      restart<&Config::broker, &BrokerConfig::container_id>("broker.container_id"),
      restart<&Config::broker, &BrokerConfig::idle_timeout>("broker.idle_timeout_ms"),
      restart<&Config::broker, &BrokerConfig::link_idle_close>("broker.link_idle_close_ms"),
      restart<&Config::broker, &BrokerConfig::reconnect_min>("broker.reconnect_min_ms"),
      restart<&Config::broker, &BrokerConfig::reconnect_max>("broker.reconnect_max_ms"),
      restart<&Config::broker, &BrokerConfig::outcome_timeout>("broker.outcome_timeout_ms"),
      restart<&Config::broker, &BrokerConfig::cloudevents>("broker.cloudevents"),
      restart<&Config::outbox, &OutboxConfig::schema>("outbox.schema"),
      restart<&Config::outbox, &OutboxConfig::workflow_schema>("outbox.workflow_schema"),
      restart<&Config::outbox, &OutboxConfig::partitions>("outbox.partitions"),
      applied<&Config::dispatch, &DispatchConfig::batch_size>("dispatch.batch_size"),
      applied<&Config::dispatch, &DispatchConfig::in_flight>("dispatch.in_flight"),
      restart<&Config::dispatch, &DispatchConfig::per_session_in_flight>("dispatch.per_session_in_flight"),
      applied<&Config::dispatch, &DispatchConfig::max_attempts>("dispatch.max_attempts"),
      applied<&Config::dispatch, &DispatchConfig::backoff_initial>("dispatch.backoff_initial_ms"),
      applied<&Config::dispatch, &DispatchConfig::backoff_max>("dispatch.backoff_max_ms"),
      applied<&Config::dispatch, &DispatchConfig::backoff_multiplier>("dispatch.backoff_multiplier"),
      applied<&Config::dispatch, &DispatchConfig::backoff_jitter>("dispatch.backoff_jitter"),
      applied<&Config::dispatch, &DispatchConfig::release_retry>("dispatch.release_retry_ms"),
      applied<&Config::dispatch, &DispatchConfig::releases_per_attempt>("dispatch.releases_per_attempt"),
      applied<&Config::dispatch, &DispatchConfig::poll_interval>("dispatch.poll_interval_ms"),
      restart<&Config::dispatch, &DispatchConfig::notify_max_rate>("dispatch.notify_max_rate"),
      restart<&Config::dispatch, &DispatchConfig::busy_poll>("dispatch.busy_poll_ms"),
      applied<&Config::dispatch, &DispatchConfig::shutdown_timeout>("dispatch.shutdown_timeout_ms"),
      applied<&Config::dispatch, &DispatchConfig::stats_interval>("dispatch.stats_interval_ms"),
      applied<&Config::dispatch, &DispatchConfig::max_message_bytes>("dispatch.max_message_bytes"),
      applied<&Config::dispatch, &DispatchConfig::claim_bytes>("dispatch.claim_bytes"),
      applied<&Config::dispatch, &DispatchConfig::in_flight_bytes>("dispatch.in_flight_bytes"),
      applied<&Config::retention, &RetentionConfig::mode>("retention.mode"),
      applied<&Config::retention, &RetentionConfig::keep_for>("retention.keep_for_s"),
      applied<&Config::retention, &RetentionConfig::failed_keep_for>("retention.failed_keep_for_s"),
      applied<&Config::retention, &RetentionConfig::purge_batch>("retention.purge_batch"),
      applied<&Config::retention, &RetentionConfig::purge_interval>("retention.purge_interval_ms"),
      restart<&Config::leases, &LeaseConfig::instance_id>("leases.instance_id"),
      restart<&Config::leases, &LeaseConfig::lease_ttl>("leases.lease_ttl_ms"),
      restart<&Config::leases, &LeaseConfig::renew_interval>("leases.renew_interval_ms"),
      restart<&Config::leases, &LeaseConfig::safety_margin>("leases.safety_margin_ms"),
      applied<&Config::log, &LogConfig::level>("log.level"),
      applied<&Config::log, &LogConfig::format>("log.format"),
      restart<&Config::http, &HttpConfig::listen>("http.listen"),
      applied<&Config::http, &HttpConfig::backlog_interval>("http.backlog_interval_ms"),
  };
  return table;
}

}  // namespace

ReloadPlan plan_reload(const Config& running, const Config& loaded) {
  ReloadPlan plan{running, {}, {}};
  for (const auto& key : keys()) {
    switch (key.compare(running, loaded)) {
      case Change::none: break;
      case Change::applied:
        key.adopt(plan.config, loaded);
        plan.applied.emplace_back(key.path);
        break;
      case Change::needs_restart: plan.needs_restart.emplace_back(key.path); break;
    }
  }
  return plan;
}

std::vector<std::string> reload_key_paths() {
  std::vector<std::string> paths;
  for (const auto& key : keys()) paths.emplace_back(key.path);
  return paths;
}

}  // namespace outboxd::config
