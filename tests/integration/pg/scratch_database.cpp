// Creating, connecting to and dropping per-test databases.
#include "scratch_database.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <random>
#include <unistd.h>

#include "config/url.hpp"
#include "pg/text_codec.hpp"

namespace outboxd::pg::testing {
namespace {

std::string admin_url() {
  const char* url = std::getenv("OUTBOXD_TEST_PG_URL");
  return url != nullptr ? url : "";
}

// The admin URL pointed at another database: the URI's path, or a conninfo's
// dbname (a later keyword wins in libpq).
std::string with_database(const std::string& url, const std::string& database) {
  for (const char* scheme : {"postgresql://", "postgres://"}) {
    if (url.rfind(scheme, 0) != 0) continue;
    const std::size_t authority = std::string(scheme).size();
    const std::size_t path = url.find_first_of("/?", authority);
    std::string rest;
    if (path != std::string::npos) {
      const std::size_t query = url.find('?', path);
      if (query != std::string::npos) rest = url.substr(query);
    }
    return url.substr(0, path == std::string::npos ? url.size() : path) + "/" + database + rest;
  }
  return url + " dbname=" + database;
}

// The URL with another user: the URI's userinfo, or a conninfo's user.
std::string with_user(const std::string& url, const std::string& user) {
  for (const char* scheme : {"postgresql://", "postgres://"}) {
    if (url.rfind(scheme, 0) != 0) continue;
    const std::size_t authority = std::string(scheme).size();
    const std::size_t end = url.find_first_of("/?", authority);
    const std::size_t at = url.rfind('@', end == std::string::npos ? url.size() : end);
    const std::size_t host = at == std::string::npos || at < authority ? authority : at + 1;
    return url.substr(0, authority) + user + "@" + url.substr(host);
  }
  return url + " user=" + user;
}

std::string unique_name() {
  static std::atomic<int> counter{0};
  std::random_device random;
  return "outboxd_pgtest_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
         std::to_string(random() % 100000);
}

config::DatabaseConfig config_for(const std::string& url) {
  config::DatabaseConfig db;
  REQUIRE(config::set_database_url(db, url));
  db.connect_timeout = std::chrono::milliseconds(5000);
  db.statement_timeout = std::chrono::milliseconds(60000);
  return db;
}

}  // namespace

Connection ScratchDatabase::admin() {
  auto connection = Connection::open(config_for(admin_url()), "outboxd-test-admin");
  if (!connection) FAIL("cannot connect to OUTBOXD_TEST_PG_URL: " << connection.error().message);
  return std::move(connection).value();
}

ScratchDatabase::ScratchDatabase()
    : name_(unique_name()), url_(with_database(admin_url(), name_)), dispatcher_role_(name_ + "_dispatcher") {
  Connection connection = admin();
  must(connection, "CREATE DATABASE " + quote_ident(name_));
}

ScratchDatabase::~ScratchDatabase() {
  auto connection = Connection::open(config_for(admin_url()), "outboxd-test-admin");
  if (!connection) return;
  (void)connection.value().exec("DROP DATABASE IF EXISTS " + quote_ident(name_) + " WITH (FORCE)");
  (void)connection.value().exec("DROP ROLE IF EXISTS " + quote_ident(dispatcher_role_));
}

config::DatabaseConfig ScratchDatabase::config() const { return config_for(url_); }

Connection ScratchDatabase::connect(const std::string& application_name) const {
  auto connection = Connection::open(config(), application_name);
  if (!connection) FAIL("cannot connect to " << name_ << ": " << connection.error().message);
  return std::move(connection).value();
}

MigrateOptions ScratchDatabase::default_options() {
  MigrateOptions options;
  options.partitions = 8;
  return options;
}

Connection ScratchDatabase::migrated(const MigrateOptions& options) const {
  Connection connection = connect();
  auto report = migrate(connection, options);
  if (!report) FAIL("migrate: " << report.error().message);
  if (!dispatcher_created_) {
    must(connection, "CREATE ROLE " + quote_ident(dispatcher_role_) + " LOGIN");
    dispatcher_created_ = true;
  }
  must(connection, "GRANT " + quote_ident(options.schema + "_dispatcher") + " TO " + quote_ident(dispatcher_role_));
  return connection;
}

Connection ScratchDatabase::dispatcher(const std::string& application_name) const {
  if (!dispatcher_created_) FAIL("dispatcher() before migrated(): the group role does not exist yet");
  auto connection = Connection::open(config_for(with_user(url_, dispatcher_role_)), application_name);
  if (!connection) {
    FAIL("cannot connect to " << name_ << " as " << dispatcher_role_ << ": " << connection.error().message);
  }
  return std::move(connection).value();
}

Rows must(Connection& connection, const std::string& sql) {
  auto rows = connection.exec(sql);
  if (!rows) FAIL(sql << "\n-> " << rows.error().message);
  return std::move(rows).value();
}

Rows must(Connection& connection, const std::string& sql, const Params& params) {
  auto rows = connection.exec_params(sql, params);
  if (!rows) FAIL(sql << "\n-> " << rows.error().message);
  return std::move(rows).value();
}

std::string plan_of(Connection& connection, const std::string& statement) {
  const Rows rows = must(connection, "EXPLAIN (COSTS OFF) " + statement);
  std::string text;
  for (int r = 0; r < rows.size(); ++r) text += std::string(rows.text(r, 0)) + "\n";
  return text;
}

void terminate_backend(Connection& victim) {
  const std::string pid(must(victim, "SELECT pg_backend_pid()").text(0, 0));
  Connection connection = ScratchDatabase::admin();
  must(connection, "SELECT pg_terminate_backend($1::int, 5000)", {pid});
}

}  // namespace outboxd::pg::testing
