// Config loading, connecting and failing, for every command.
#include <iostream>

#include "config/loader.hpp"
#include "config/outboxes.hpp"
#include "config/security_warnings.hpp"
#include "config/url.hpp"
#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "log/log.hpp"
#include "pg/privileges.hpp"
#include "pg/transport_security.hpp"

namespace outboxd::daemon {

std::optional<config::Config> load_config_or_report(const std::string& path) {
  auto loaded = config::load_file(path);
  if (!loaded) {
    std::cerr << loaded.error_text() << '\n';
    const auto count = loaded.diagnostics().size();
    std::cerr << path << ": " << count << (count == 1 ? " error" : " errors") << '\n';
    return std::nullopt;
  }
  return std::move(loaded).value();
}

std::optional<pg::Connection> connect_for_command(const config::Config& config, const char* command) {
  return connect_for_command(config.database, command);
}

std::optional<pg::Connection> connect_for_command(const config::DatabaseConfig& database, const char* command) {
  auto connection = pg::Connection::open(database, std::string("outboxd ") + command);
  if (!connection) {
    std::cerr << command << ": cannot connect to " << config::describe(database.target) << ": "
              << connection.error().message << '\n';
    return std::nullopt;
  }
  return std::move(connection).value();
}

std::vector<std::string> security_warnings(const config::Config& config) {
  std::vector<std::string> warnings;
  for (const auto& section : config::database_sections(config)) {
    const config::DatabaseConfig& database = *section.database;
    // An outbox that connects where database: does was warned about as database:.
    const bool own = section.path == "database" || database.target != config.database.target ||
                     database.listen_target != config.database.listen_target;
    if (!own) continue;
    for (auto& warning : pg::database_tls_warnings(database, section.path)) warnings.push_back(std::move(warning));
  }
  for (auto& warning : config::secret_file_warnings(config)) warnings.push_back(std::move(warning));
  return warnings;
}

int database_failure(const char* command, const core::Error& error, pg::Connection& connection,
                     const config::Config& config) {
  std::cerr << command << ": " << error.message << '\n';
  if (error.kind != core::ErrorKind::forbidden) return kExitFailure;
  std::cerr << command << ": " << pg::dispatcher_privilege_fix(connection, config.outbox.schema) << '\n';
  return kExitConfig;
}

bool init_logging(const config::Config& config) {
  const auto format = config.log.format == config::LogFormat::json ? log::Format::json : log::Format::human;
  if (auto ready = log::init(config.log.level, format); !ready) {
    std::cerr << "log: " << ready.error().message << '\n';
    return false;
  }
  return true;
}

}  // namespace outboxd::daemon
