// Applies the embedded migration scripts under a transaction-scoped advisory lock.
#include "pg/migrator.hpp"

#include <algorithm>
#include <map>

#include "config/schema_name.hpp"
#include "pg/embedded_migrations.hpp"
#include "pg/sha256.hpp"
#include "pg/text_codec.hpp"

namespace outboxd::pg {
namespace {

struct Applied {
  std::string name;
  std::string checksum;
};

// Rolls back on scope exit unless committed; transaction-scoped locks and
// settings die with it, which keeps migrate safe behind a transaction pooler.
class Transaction {
 public:
  explicit Transaction(Connection& connection) : connection_(connection) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction() {
    if (open_ && connection_.ok()) (void)connection_.exec("ROLLBACK");
  }

  core::Status begin(const std::string& schema) {
    if (auto begun = connection_.exec("BEGIN"); !begun) return begun.error();
    open_ = true;
    auto locked = connection_.exec_params("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1))",
                                          {"outboxd.migrate:" + schema});
    if (!locked) return locked.error();
    return {};
  }

  core::Status commit() {
    open_ = false;
    auto committed = connection_.exec("COMMIT");
    if (!committed) return committed.error();
    return {};
  }

 private:
  Connection& connection_;
  bool open_ = false;
};

core::Error in_context(const std::string& context, const core::Error& error) {
  return {error.kind, context + ": " + error.message};
}

std::string table_of(const std::string& schema) { return quote_ident(schema) + ".schema_migrations"; }

core::Result<std::map<int, Applied>> read_applied(Connection& connection, const std::string& schema) {
  auto rows = connection.exec("SELECT version, name, checksum FROM " + table_of(schema) + " ORDER BY version");
  if (!rows) return rows.error();
  std::map<int, Applied> applied;
  for (int row = 0; row < rows.value().size(); ++row) {
    applied.emplace(static_cast<int>(rows.value().int64(row, 0)),
                    Applied{std::string(rows.value().text(row, 1)), std::string(rows.value().text(row, 2))});
  }
  return applied;
}

core::Error edited(const std::string& name, const std::string& recorded, const std::string& embedded) {
  return core::fatal_error("migration " + name + " was edited after it was applied (checksum " + recorded +
                           " != " + embedded + "); restore the applied text and put changes in a new migration");
}

// What the database has must be a prefix of what the binary knows, unedited.
core::Status validate(const std::map<int, Applied>& applied, std::span<const Migration> known) {
  if (applied.empty()) return {};
  const int newest = applied.rbegin()->first;
  const int known_newest = known.empty() ? 0 : known.back().version;
  if (newest > known_newest) {
    return core::fatal_error("database is at version " + std::to_string(newest) + ", this binary knows up to " +
                             std::to_string(known_newest) + "; use a newer outboxd");
  }
  for (const auto& [version, record] : applied) {
    const auto it =
        std::find_if(known.begin(), known.end(), [v = version](const Migration& m) { return m.version == v; });
    if (it == known.end()) {
      return core::fatal_error("database has migration " + record.name + " (version " + std::to_string(version) +
                               ") that this binary does not know");
    }
    if (it->checksum != record.checksum) return edited(it->name, record.checksum, it->checksum);
  }
  for (const Migration& migration : known) {
    if (migration.version < newest && applied.count(migration.version) == 0) {
      return core::fatal_error("migration " + migration.name + " was never applied but later version " +
                               std::to_string(newest) + " was; apply it by hand or restore the database");
    }
  }
  return {};
}

// Creates the schema and the record table (unless dry run) and returns what is applied.
core::Result<std::map<int, Applied>> prepare_bookkeeping(Connection& connection, const MigrateOptions& options) {
  Transaction transaction(connection);
  if (auto begun = transaction.begin(options.schema); !begun) return begun.error();
  auto present = connection.exec_params(
      "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1), "
      "pg_catalog.to_regclass(pg_catalog.quote_ident($1) || '.schema_migrations') IS NOT NULL",
      {options.schema});
  if (!present) return present.error();
  const bool schema_exists = present.value().boolean(0, 0);
  const bool table_exists = present.value().boolean(0, 1);
  if (options.dry_run && !table_exists) return std::map<int, Applied>{};
  if (!schema_exists) {
    // Only when missing: CREATE SCHEMA IF NOT EXISTS still demands the CREATE privilege.
    auto created = connection.exec("CREATE SCHEMA " + quote_ident(options.schema));
    if (!created) return created.error();
  }
  if (!table_exists) {
    auto created = connection.exec("CREATE TABLE " + table_of(options.schema) +
                                   " (\n"
                                   "  version    int PRIMARY KEY,\n"
                                   "  name       text NOT NULL,\n"
                                   "  checksum   text NOT NULL,\n"
                                   "  applied_at timestamptz NOT NULL DEFAULT now(),\n"
                                   "  applied_by text NOT NULL DEFAULT current_user\n"
                                   ")");
    if (!created) return created.error();
  }
  auto applied = read_applied(connection, options.schema);
  if (!applied) return applied.error();
  if (!options.dry_run) {
    if (auto committed = transaction.commit(); !committed) return committed.error();
  }
  return applied;
}

// One script in its own transaction. Returns whether it ran (false: another
// migrate run applied it meanwhile).
core::Result<bool> apply(Connection& connection, const MigrateOptions& options, const Migration& migration) {
  Transaction transaction(connection);
  if (auto begun = transaction.begin(options.schema); !begun) return begun.error();
  const std::string table = table_of(options.schema);
  // Re-read under the lock: a concurrent run may have applied it since we looked.
  auto recorded = connection.exec_params("SELECT checksum FROM " + table + " WHERE version = $1",
                                         {std::to_string(migration.version)});
  if (!recorded) return recorded.error();
  if (recorded.value().size() > 0) {
    const std::string checksum(recorded.value().text(0, 0));
    if (checksum != migration.checksum) return edited(migration.name, checksum, migration.checksum);
    return false;
  }
  // Transaction-local settings (is_local = true): the scripts read them, and
  // nothing leaks into a pooled server connection afterwards.
  auto configured = connection.exec_params(
      "SELECT pg_catalog.set_config('outboxd.schema', $1, true), "
      "pg_catalog.set_config('outboxd.workflow_schema', $2, true), "
      "pg_catalog.set_config('outboxd.partitions', $3, true), "
      "pg_catalog.set_config('outboxd.legacy_writer', $4, true)",
      {options.schema, options.workflow_schema, std::to_string(options.partitions), options.legacy_writer});
  if (!configured) return configured.error();
  if (auto ran = connection.exec(migration.sql); !ran) return ran.error();
  // The scripts set search_path for the connection. Given back in the same
  // transaction: behind a transaction pooler a later statement may run on
  // another server connection, and this one would keep the scripts' path for
  // whichever client gets it next.
  if (auto reset = connection.exec("RESET search_path"); !reset) return reset.error();
  auto inserted = connection.exec_params("INSERT INTO " + table + " (version, name, checksum) VALUES ($1, $2, $3)",
                                         {std::to_string(migration.version), migration.name, migration.checksum});
  if (!inserted) return inserted.error();
  if (auto committed = transaction.commit(); !committed) return committed.error();
  return true;
}

core::Status check_options(const MigrateOptions& options) {
  if (const auto problem = config::schema_name_problem(options.schema, config::SchemaKind::outbox)) {
    return core::fatal_error("outbox.schema " + *problem);
  }
  if (const auto problem = config::schema_name_problem(options.workflow_schema, config::SchemaKind::workflow)) {
    return core::fatal_error("outbox.workflow_schema " + *problem);
  }
  if (options.partitions < 1 || options.partitions > 4096) {
    return core::fatal_error("outbox.partitions must be 1..4096, not " + std::to_string(options.partitions));
  }
  return {};
}

}  // namespace

const char* to_string(MigrationState state) {
  switch (state) {
    case MigrationState::applied_now: return "applied now";
    case MigrationState::already_applied: return "already applied";
    case MigrationState::would_apply: return "would apply";
  }
  return "unknown";
}

int MigrationReport::count(MigrationState state) const {
  return static_cast<int>(
      std::count_if(steps.begin(), steps.end(), [state](const MigrationStep& s) { return s.state == state; }));
}

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> sorted = [] {
    std::vector<Migration> list;
    for (const EmbeddedScript& script : embedded_scripts()) {
      list.push_back({script.version, std::string(script.name), std::string(script.sql), sha256_hex(script.sql)});
    }
    std::sort(list.begin(), list.end(), [](const Migration& a, const Migration& b) { return a.version < b.version; });
    return list;
  }();
  return sorted;
}

core::Result<MigrationReport> migrate(Connection& connection, const MigrateOptions& options) {
  return migrate(connection, options, migrations());
}

core::Result<MigrationReport> migrate(Connection& connection, const MigrateOptions& options,
                                      std::span<const Migration> known) {
  if (auto valid = check_options(options); !valid) return valid.error();
  auto applied = prepare_bookkeeping(connection, options);
  if (!applied) return in_context("migrate", applied.error());
  if (auto valid = validate(applied.value(), known); !valid) return valid.error();

  MigrationReport report;
  report.dry_run = options.dry_run;
  report.version_before = applied.value().empty() ? 0 : applied.value().rbegin()->first;
  report.version_after = report.version_before;
  for (const Migration& migration : known) {
    MigrationStep step{migration.version, migration.name, MigrationState::already_applied};
    if (applied.value().count(migration.version) == 0) {
      if (options.dry_run) {
        step.state = MigrationState::would_apply;
      } else {
        auto ran = apply(connection, options, migration);
        if (!ran) return in_context("migration " + migration.name, ran.error());
        if (ran.value()) step.state = MigrationState::applied_now;
        report.version_after = std::max(report.version_after, migration.version);
      }
    }
    report.steps.push_back(std::move(step));
  }
  return report;
}

core::Result<std::optional<int>> applied_version(Connection& connection, const std::string& schema) {
  auto exists = connection.exec_params(
      "SELECT pg_catalog.to_regclass(pg_catalog.quote_ident($1) || '.schema_migrations') IS NOT NULL", {schema});
  if (!exists) return exists.error();
  if (!exists.value().boolean(0, 0)) return std::optional<int>();
  auto rows = connection.exec("SELECT max(version) FROM " + table_of(schema));
  if (!rows) return rows.error();
  return std::optional<int>(static_cast<int>(rows.value().int64(0, 0)));
}

core::Result<bool> outbox_installed(Connection& connection, const std::string& schema) {
  auto exists = connection.exec_params(
      "SELECT pg_catalog.to_regclass(pg_catalog.quote_ident($1) || '.messages') IS NOT NULL", {schema});
  if (!exists) return exists.error();
  return exists.value().boolean(0, 0);
}

}  // namespace outboxd::pg
