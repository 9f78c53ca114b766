// Builds libpq connection keywords: the URL's first, then application name, timeouts, keepalives, password.
#include "pg/connect_params.hpp"

#include <algorithm>

#include "config/watchdog.hpp"

namespace outboxd::pg {

Settings daemon_settings(const config::DatabaseConfig& config) {
  // Short OLTP statements only. The planner overestimates the scheduled claim
  // (due_at > created_at compares two columns) and JIT-compiling it then costs
  // tens of milliseconds per call. For the same reason the plan cache kept
  // planning it afresh on every call (its generic plan looked dearer than a
  // custom one, though both walk messages_scheduled_idx): about 2 ms per claim,
  // a fifth of the database's CPU per row in a drain. Every statement of the
  // daemon is written for its generic plan, and for an index: a generic plan
  // is kept for the connection, and one made while the outbox was empty (a
  // daemon started on a quiet outbox, the table just vacuumed) took it for
  // empty and read a backlog with a sequential scan and a sort, a second per
  // claim at 200,000 rows, until autovacuum's ANALYZE. Without sequential
  // scans it walks the index it was written for at any size. Without bitmap
  // scans too: a bitmap scan never marks the index entries of deleted rows
  // dead, so the late-commit question, which looks at a session's rows below
  // the cursor (the rows just dispatched, deleted and not yet vacuumed),
  // visited them all again on every claim: 80 ms a claim half-way through a
  // bulk of 200,000 rows in 1,000 sessions, 10 ms with plain index scans.
  return {{"statement_timeout", std::to_string(config.statement_timeout.count())},
          {"jit", "off"},
          {"plan_cache_mode", "force_generic_plan"},
          {"enable_seqscan", "off"},
          {"enable_bitmapscan", "off"}};
}

core::Result<ConnectParams> connect_params(const config::DatabaseConfig& config, const std::string& application_name) {
  const config::PgTarget& in_url = config.target;
  if (in_url.options.empty()) return core::fatal_error("database.url was not parsed (config::set_database_url)");
  ConnectParams params;
  auto add = [&params](std::string key, std::string value) {
    params.keywords.emplace_back(std::move(key), std::move(value));
  };
  auto add_default = [&](const char* key, std::string value) {
    if (in_url.get(key).empty()) add(key, std::move(value));
  };

  const bool merge_options = config.pooler == config::Pooler::none;  // see below
  for (const auto& [key, value] : in_url.options) {
    if (key != "options" || !merge_options) add(key, value);
  }
  add("application_name", application_name);
  add("connect_timeout", std::to_string(config::connect_timeout_applied(config).count()));
  // A pooler refuses `options` in the startup packet (PgBouncer: "unsupported
  // startup parameter") or drops it; Connection applies the settings itself.
  if (merge_options) {
    std::string options;
    if (const std::string own = in_url.get("options"); !own.empty()) options = own + " ";
    for (const auto& [name, value] : daemon_settings(config)) options += "-c " + name + "=" + value + " ";
    options.pop_back();
    add("options", std::move(options));
  }
  // A daemon that sleeps on its socket waiting for NOTIFY must notice a dead
  // peer by itself; the kernel defaults take hours.
  add_default("client_encoding", "UTF8");  // AMQP strings are UTF-8 whatever the database uses
  add_default("keepalives_idle", "15");
  add_default("keepalives_interval", "5");
  add_default("keepalives_count", "3");
  add_default("tcp_user_timeout", "30000");  // ms; unacknowledged writes to a dead peer
  if (!config.password.empty()) add("password", config.password);
  return params;
}

}  // namespace outboxd::pg
