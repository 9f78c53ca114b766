// A fresh database per test case on the cluster named by OUTBOXD_TEST_PG_URL, dropped afterwards.
#pragma once

#include <string>

#include "config/config.hpp"
#include "pg/connection.hpp"
#include "pg/migrator.hpp"

namespace outboxd::pg::testing {

class ScratchDatabase {
 public:
  ScratchDatabase();  // CREATE DATABASE with a unique name
  ~ScratchDatabase();  // DROP DATABASE ... WITH (FORCE)
  ScratchDatabase(const ScratchDatabase&) = delete;
  ScratchDatabase& operator=(const ScratchDatabase&) = delete;

  const std::string& name() const { return name_; }
  config::DatabaseConfig config() const;  // points at the scratch database
  Connection connect(const std::string& application_name = "outboxd-test") const;
  // A connection with every migration applied (schema `outbox`, 8 partitions).
  Connection migrated(const MigrateOptions& options = default_options()) const;
  // A superuser connection to the cluster's maintenance database.
  static Connection admin();

  static MigrateOptions default_options();

 private:
  std::string name_;
  std::string url_;
};

// exec() that must succeed; returns the rows.
Rows must(Connection& connection, const std::string& sql);
Rows must(Connection& connection, const std::string& sql, const Params& params);

// Terminates the backend of `victim` from an admin session.
void terminate_backend(Connection& victim);

}  // namespace outboxd::pg::testing
