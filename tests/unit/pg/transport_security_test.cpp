// libpq's view of a database URL for the TLS warning: hosts, hostaddr and the effective sslmode.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>

#include "config/url.hpp"
#include "pg/transport_security.hpp"

using namespace outboxd;

namespace {

// Sets (or clears) an environment variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

config::PgTransport transport(const std::string& url) {
  auto target = config::parse_pg_url(url);
  REQUIRE(target.ok());
  auto parsed = pg::pg_transport(target.value());
  REQUIRE(parsed.ok());
  return parsed.value();
}

}  // namespace

TEST_CASE("The effective sslmode is the URL's, else PGSSLMODE's, else prefer", "[pg][security]") {
  ScopedEnv host("PGHOST", nullptr);
  ScopedEnv address("PGHOSTADDR", nullptr);
  ScopedEnv mode("PGSSLMODE", nullptr);

  CHECK(transport("postgresql://u@db.example.com/app").sslmode == "prefer");
  CHECK(transport("postgresql://u@db.example.com/app").hosts == std::vector<std::string>{"db.example.com"});
  CHECK(transport("postgresql://u@db.example.com/app?sslmode=verify-full").sslmode == "verify-full");
  CHECK(transport("host=a,b port=1,2 sslmode=require").hosts == std::vector<std::string>{"a", "b"});
  CHECK(transport("host=db.example.com hostaddr=127.0.0.1").hosts == std::vector<std::string>{"127.0.0.1"});
  CHECK(transport("dbname=app").hosts == std::vector<std::string>{""});  // the Unix socket

  ScopedEnv env_mode("PGSSLMODE", "verify-ca");
  ScopedEnv env_host("PGHOST", "db.internal");
  CHECK(transport("dbname=app").sslmode == "verify-ca");
  CHECK(transport("dbname=app").hosts == std::vector<std::string>{"db.internal"});
  CHECK(transport("dbname=app sslmode=disable").sslmode == "disable");
}

TEST_CASE("TLS warnings cover database.url and database.listen_url", "[pg][security]") {
  ScopedEnv mode("PGSSLMODE", nullptr);
  config::DatabaseConfig database;
  REQUIRE(config::set_database_url(database, "postgresql://u:secret@db.example.com/app"));
  database.listen_target = config::parse_pg_url("postgresql://u@127.0.0.1/app").value();
  auto warnings = pg::database_tls_warnings(database);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].rfind("database.url: sslmode is prefer for db.example.com, not loopback", 0) == 0);
  CHECK(warnings[0].find("secret") == std::string::npos);

  REQUIRE(config::set_database_url(
      database, "postgresql://u@db.example.com/app?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem"));
  database.listen_target = config::parse_pg_url("host=10.1.2.3 sslmode=require").value();
  warnings = pg::database_tls_warnings(database);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].rfind("database.listen_url: sslmode is require for 10.1.2.3", 0) == 0);
  // Another database: section (an outbox's of outboxes:, the catalog's) is named by its own path.
  warnings = pg::database_tls_warnings(database, "outboxes[2].database");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].rfind("outboxes[2].database.listen_url: sslmode is require for 10.1.2.3", 0) == 0);

  // A string libpq cannot parse never gets here: the config refuses it, unquoted.
  const auto bad = config::parse_pg_url("postgresql://u:secret@host/app?nonsense=1");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("secret") == std::string::npos);
}

TEST_CASE("a TLS warning names the host whole, even when a password equals it", "[pg][security]") {
  ScopedEnv mode("PGSSLMODE", nullptr);
  config::DatabaseConfig database;
  REQUIRE(config::set_database_url(database, "postgresql://u:db.example.com@db.example.com/app"));
  const auto warnings = pg::database_tls_warnings(database);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].rfind("database.url: sslmode is prefer for db.example.com, not loopback", 0) == 0);
}
