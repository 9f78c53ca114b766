// `outboxd migrate [--dry-run] [--legacy-writer ROLE]`: apply the embedded migrations to one outbox or each; say what happened.
#include <iostream>

#include "config/outboxes.hpp"
#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "pg/connection.hpp"
#include "pg/migrator.hpp"

namespace outboxd::daemon {
namespace {

struct MigrateRun {
  bool dry_run = false;
  std::string legacy_writer;
  // With many outboxes each one's block lists only the scripts it applies or
  // would apply: the others, already applied, would repeat for every outbox.
  bool changes_only = false;
};

std::string migrations(int count) { return std::to_string(count) + (count == 1 ? " migration" : " migrations"); }

void print_report(const pg::MigrationReport& r, const std::string& schema, const MigrateRun& run) {
  for (const auto& step : r.steps) {
    if (run.changes_only && step.state == pg::MigrationState::already_applied) continue;
    std::cout << "  " << step.name << ": " << pg::to_string(step.state) << '\n';
  }
  const int applied = r.count(pg::MigrationState::applied_now);
  const int pending = r.count(pg::MigrationState::would_apply);
  const char* indent = run.changes_only ? "  " : "";
  if (run.dry_run) {
    std::cout << indent << "dry run: " << migrations(pending) << " would be applied to schema " << schema
              << " (now at version " << r.version_before << "); nothing changed\n";
  } else if (applied == 0) {
    std::cout << indent << "schema " << schema << " is up to date at version " << r.version_after
              << "; nothing to do\n";
  } else {
    std::cout << indent << "applied " << migrations(applied) << " to schema " << schema << ": version "
              << r.version_before << " -> " << r.version_after << '\n';
  }
}

// Migrates the outbox of `config`; the exit code. `command` names it in messages ("migrate", "migrate acme").
int migrate_one(const config::Config& config, const std::string& command, const MigrateRun& run) {
  auto connection = connect_for_command(config, command.c_str());
  if (!connection) return kExitFailure;
  pg::MigrateOptions options;
  options.schema = config.outbox.schema;
  options.workflow_schema = config.outbox.workflow_schema;
  options.partitions = config.outbox.partitions;
  options.dry_run = run.dry_run;
  options.legacy_writer = run.legacy_writer;
  auto report = pg::migrate(*connection, options);
  if (!report) {
    std::cerr << command << ": " << report.error().message << '\n';
    if (report.error().kind != core::ErrorKind::forbidden) return kExitFailure;
    std::cerr << command << ": run it as a role that may create schemas in this database and has CREATEROLE (its "
              << "owner with CREATEROLE, or a superuser); the daemon itself needs only " << options.schema
              << "_dispatcher\n";
    return kExitConfig;
  }
  print_report(report.value(), options.schema, run);
  return kExitOk;
}

// One after another, past a failed one: each outbox's database is its own.
int migrate_all(const config::Config& config, MigrateRun run) {
  run.changes_only = true;
  const AllOutboxes all = all_outboxes(config, "migrate");
  std::vector<std::string> failed;
  for (const auto& entry : all.entries) {
    // Flushed, so that its errors on stderr follow its heading on a terminal.
    std::cout << "outbox " << outbox_heading(entry) << ":\n" << std::flush;
    if (migrate_one(config::for_outbox(config, entry), "migrate " + entry.name, run) != kExitOk) {
      std::cout << "  failed: see the messages of migrate " << entry.name << '\n';
      failed.push_back(entry.name);
    }
  }
  const auto done = all.entries.size() - failed.size();
  std::cout << "migrate: " << done << " of " << all.entries.size() << " outbox" << (all.entries.size() == 1 ? "" : "es")
            << (run.dry_run ? " checked" : " migrated");
  if (!failed.empty()) {
    std::cout << "; failed: ";
    for (std::size_t i = 0; i < failed.size(); ++i) std::cout << (i == 0 ? "" : ", ") << failed[i];
  }
  if (!all.complete) std::cout << "; the catalog could not be read";
  std::cout << '\n';
  return failed.empty() && all.complete ? kExitOk : kExitFailure;
}

}  // namespace

int cmd_migrate(const ConfigChoice& choice, bool dry_run, const std::string& legacy_writer) {
  const auto config = load_config_or_report(choice.path);
  if (!config) return kExitConfig;
  const MigrateRun run{dry_run, legacy_writer, false};
  if (config->many_outboxes() && choice.outbox.empty()) return migrate_all(*config, run);
  const auto one = choose_outbox(*config, choice, "migrate");
  if (!one.config) return one.exit_code;
  return migrate_one(*one.config, "migrate", run);
}

}  // namespace outboxd::daemon
