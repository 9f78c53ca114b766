// `outboxd migrate`: applies the embedded sql/ scripts once each, in order, recorded with checksums.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "pg/connection.hpp"

namespace outboxd::pg {

struct Migration {
  int version = 0;
  std::string name;      // file name, e.g. "001_outbox.sql"
  std::string sql;       // the file's bytes
  std::string checksum;  // sha256 hex of the file's bytes
};

// The scripts compiled into this binary, sorted by version.
const std::vector<Migration>& migrations();

struct MigrateOptions {
  std::string schema = "outbox";             // outboxd.schema for the scripts
  std::string workflow_schema = "workflow";  // outboxd.workflow_schema
  int partitions = 64;                       // outboxd.partitions (first install only)
  bool dry_run = false;                      // change nothing; still validate what is applied
  std::string legacy_writer;                 // outboxd.legacy_writer: who wrote the rows 023 finds
};

enum class MigrationState { applied_now, already_applied, would_apply };
const char* to_string(MigrationState state);

struct MigrationStep {
  int version = 0;
  std::string name;
  MigrationState state = MigrationState::would_apply;
};

struct MigrationReport {
  std::vector<MigrationStep> steps;  // one per known script, in order
  int version_before = 0;            // highest applied version found (0: none)
  int version_after = 0;
  bool dry_run = false;
  int count(MigrationState state) const;
};

// Creates <schema> and <schema>.schema_migrations if missing, then applies
// each script not yet recorded, each in its own transaction that holds
// pg_advisory_xact_lock(hashtext('outboxd.migrate:' || schema)), so that
// concurrent runs serialize and apply every script once. Refuses (fatal) when
// an applied script was edited, or the database knows versions this binary
// does not.
core::Result<MigrationReport> migrate(Connection& connection, const MigrateOptions& options);
// The same with an explicit script list (tests simulate other binaries).
core::Result<MigrationReport> migrate(Connection& connection, const MigrateOptions& options,
                                      std::span<const Migration> known);

// Highest applied version, or nullopt when <schema>.schema_migrations does not exist.
core::Result<std::optional<int>> applied_version(Connection& connection, const std::string& schema);
// Whether <schema>.messages exists: without schema_migrations, it tells a schema
// installed by another tool (psql) from one never installed.
core::Result<bool> outbox_installed(Connection& connection, const std::string& schema);

}  // namespace outboxd::pg
