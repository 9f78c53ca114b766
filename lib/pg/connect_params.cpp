// Builds libpq connection keywords: URL first, then application name, timeouts, keepalives, password.
#include "pg/connect_params.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <map>

namespace outboxd::pg {
namespace {

// What the URL itself sets, so that we only fill in what it leaves out.
core::Result<std::map<std::string, std::string>> url_settings(const std::string& url) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
  if (options == nullptr) {
    if (error != nullptr) PQfreemem(error);
    // libpq's message may quote fragments of the URL, password included.
    return core::fatal_error("database.url is not a valid libpq URI or conninfo string");
  }
  std::map<std::string, std::string> settings;
  for (const PQconninfoOption* option = options; option->keyword != nullptr; ++option) {
    if (option->val != nullptr) settings.emplace(option->keyword, option->val);
  }
  PQconninfoFree(options);
  return settings;
}

long long whole_seconds_up(std::chrono::milliseconds duration) {
  return std::max<long long>(1, (duration.count() + 999) / 1000);
}

}  // namespace

Settings daemon_settings(const config::DatabaseConfig& config) {
  // Short OLTP statements only. The planner overestimates the scheduled claim
  // (due_at > created_at compares two columns) and JIT-compiling it then costs
  // tens of milliseconds per call.
  return {{"statement_timeout", std::to_string(config.statement_timeout.count())}, {"jit", "off"}};
}

core::Result<ConnectParams> connect_params(const config::DatabaseConfig& config, const std::string& application_name) {
  auto parsed = url_settings(config.url);
  if (!parsed) return parsed.error();
  const auto& in_url = parsed.value();
  ConnectParams params;
  auto add = [&params](std::string key, std::string value) {
    params.keywords.emplace_back(std::move(key), std::move(value));
  };
  auto add_default = [&](const char* key, std::string value) {
    if (in_url.find(key) == in_url.end()) add(key, std::move(value));
  };

  add("dbname", config.url);
  add("application_name", application_name);
  add("connect_timeout", std::to_string(whole_seconds_up(config.connect_timeout)));
  // A pooler refuses `options` in the startup packet (PgBouncer: "unsupported
  // startup parameter") or drops it; Connection applies the settings itself.
  if (config.pooler == config::Pooler::none) {
    std::string options;
    if (auto it = in_url.find("options"); it != in_url.end() && !it->second.empty()) options = it->second + " ";
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
