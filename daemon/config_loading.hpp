// Loading the config file for a command, connecting and reporting failures, with diagnostics printed to stderr.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "pg/connection.hpp"

namespace outboxd::daemon {

// The config, or nullopt after printing every diagnostic to stderr.
std::optional<config::Config> load_config_or_report(const std::string& path);

// A database connection for a one-shot command, or nullopt after printing why not.
std::optional<pg::Connection> connect_for_command(const config::Config& config, const char* command);
// The same to another database: section (the catalog's).
std::optional<pg::Connection> connect_for_command(const config::DatabaseConfig& database, const char* command);

// What the config leaves exposed though it works: database TLS weaker than
// verify-full to a remote host, password files others can read, for
// database: and each outbox's and the catalog's own. `run` logs them at
// warn, check-config prints them.
std::vector<std::string> security_warnings(const config::Config& config);

// The exit code of a command whose statement failed, after printing why: 78
// (configuration) with what to grant when a privilege was missing, else 1.
int database_failure(const char* command, const core::Error& error, pg::Connection& connection,
                     const config::Config& config);

// Logging set up from the config; false (after printing why) on a bad level.
bool init_logging(const config::Config& config);

}  // namespace outboxd::daemon
