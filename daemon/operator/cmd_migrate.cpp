// `outboxd migrate [--dry-run] [--legacy-writer ROLE]`: apply the embedded SQL migrations and say what happened.
#include <iostream>

#include "config/loader.hpp"
#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "pg/connection.hpp"
#include "pg/migrator.hpp"

namespace outboxd::daemon {

int cmd_migrate(const std::string& path, bool dry_run, const std::string& legacy_writer) {
  const auto config = load_config_or_report(path);
  if (!config) return kExitConfig;
  auto connection = connect_for_command(*config, "migrate");
  if (!connection) return kExitFailure;
  pg::MigrateOptions options;
  options.schema = config->outbox.schema;
  options.workflow_schema = config->outbox.workflow_schema;
  options.partitions = config->outbox.partitions;
  options.dry_run = dry_run;
  options.legacy_writer = legacy_writer;
  auto report = pg::migrate(*connection, options);
  if (!report) {
    std::cerr << "migrate: " << report.error().message << '\n';
    if (report.error().kind != core::ErrorKind::forbidden) return kExitFailure;
    std::cerr << "migrate: run it as a role that may create schemas in this database and has CREATEROLE (its "
                 "owner with CREATEROLE, or a superuser); the daemon itself needs only "
              << options.schema << "_dispatcher\n";
    return kExitConfig;
  }
  const auto& r = report.value();
  for (const auto& step : r.steps) {
    std::cout << "  " << step.name << ": " << pg::to_string(step.state) << '\n';
  }
  const int applied = r.count(pg::MigrationState::applied_now);
  const int pending = r.count(pg::MigrationState::would_apply);
  if (dry_run) {
    std::cout << "dry run: " << pending << " migration" << (pending == 1 ? "" : "s") << " would be applied to schema "
              << options.schema << " (now at version " << r.version_before << "); nothing changed\n";
  } else if (applied == 0) {
    std::cout << "schema " << options.schema << " is up to date at version " << r.version_after
              << "; nothing to do\n";
  } else {
    std::cout << "applied " << applied << " migration" << (applied == 1 ? "" : "s") << " to schema "
              << options.schema << ": version " << r.version_before << " -> " << r.version_after << '\n';
  }
  return kExitOk;
}

}  // namespace outboxd::daemon
