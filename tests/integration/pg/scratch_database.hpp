// A fresh database per test case on OUTBOXD_TEST_PG_URL's cluster, with a dispatcher login role; both dropped after.
#pragma once

#include <string>

#include "config/config.hpp"
#include "pg/connection.hpp"
#include "pg/migrator.hpp"

namespace outboxd::pg::testing {

// connect() and migrated() are superuser sessions: set-up and assertions.
// The code under test (stores, leases, the CLI's queries) runs in
// dispatcher() sessions, as deployed: a login role that holds only the
// <schema>_dispatcher group role that migrated() created.
class ScratchDatabase {
 public:
  ScratchDatabase();  // CREATE DATABASE with a unique name
  ~ScratchDatabase();  // DROP DATABASE ... WITH (FORCE), DROP ROLE of the dispatcher login role
  ScratchDatabase(const ScratchDatabase&) = delete;
  ScratchDatabase& operator=(const ScratchDatabase&) = delete;

  const std::string& name() const { return name_; }
  config::DatabaseConfig config() const;  // points at the scratch database
  Connection connect(const std::string& application_name = "outboxd-test") const;
  // A connection with every migration applied (schema `outbox`, 8 partitions);
  // the dispatcher login role gets <options.schema>_dispatcher.
  Connection migrated(const MigrateOptions& options = default_options()) const;
  // A session of the login role that holds only the dispatcher group role
  // (a new one each call: no plan cached by a more privileged session). After migrated().
  Connection dispatcher(const std::string& application_name = "outboxd-test-dispatcher") const;
  // A superuser connection to the cluster's maintenance database.
  static Connection admin();

  static MigrateOptions default_options();

 private:
  std::string name_;
  std::string url_;
  std::string dispatcher_role_;    // cluster-wide: unique per database, dropped with it
  mutable bool dispatcher_created_ = false;
};

// exec() that must succeed; returns the rows.
Rows must(Connection& connection, const std::string& sql);
Rows must(Connection& connection, const std::string& sql, const Params& params);

// The plan of `statement` (EXPLAIN (COSTS OFF) on `connection`), one line per plan row.
std::string plan_of(Connection& connection, const std::string& statement);

// Terminates the backend of `victim` from an admin connection.
void terminate_backend(Connection& victim);

}  // namespace outboxd::pg::testing
