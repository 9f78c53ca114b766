// libpq keywords: the password travels on its own, our settings win, the URL's options survive.
#include <catch2/catch.hpp>

#include <map>

#include "pg/connect_params.hpp"

using namespace outboxd;

namespace {

std::map<std::string, std::string> keywords_of(const config::DatabaseConfig& db) {
  auto params = pg::connect_params(db, "outboxd test");
  REQUIRE(params.ok());
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : params.value().keywords) out[key] = value;
  return out;
}

}  // namespace

TEST_CASE("connect_params keeps the password out of every other value", "[pg]") {
  config::DatabaseConfig db;
  db.url = "postgresql://outboxd@db.example:5432/app";
  db.password = "s3cret pass'word";
  db.statement_timeout = std::chrono::milliseconds(2500);
  db.connect_timeout = std::chrono::milliseconds(1200);
  auto params = pg::connect_params(db, "outboxd host-1");
  REQUIRE(params.ok());
  const auto& list = params.value().keywords;
  REQUIRE(list.front().first == "dbname");  // first, so later keywords override the URL
  CHECK(list.front().second == db.url);
  int passwords = 0;
  for (const auto& [key, value] : list) {
    if (key == "password") {
      ++passwords;
      CHECK(value == db.password);
    } else {
      CHECK(value.find("s3cret") == std::string::npos);
    }
  }
  CHECK(passwords == 1);
  const auto keys = keywords_of(db);
  CHECK(keys.at("application_name") == "outboxd test");
  CHECK(keys.at("connect_timeout") == "2");  // whole seconds, rounded up
  CHECK(keys.at("options") == "-c statement_timeout=2500 -c jit=off");
  CHECK(keys.at("keepalives_idle") == "15");
}

TEST_CASE("connect_params without a configured password leaves libpq its own sources", "[pg]") {
  config::DatabaseConfig db;
  db.url = "host=127.0.0.1 port=5432 dbname=app user=outboxd";
  CHECK(keywords_of(db).count("password") == 0);
}

TEST_CASE("connect_params appends to the URL's own options and respects its keepalives", "[pg]") {
  config::DatabaseConfig db;
  db.url = "postgresql://u@h/app?options=-c%20search_path%3Dx&keepalives_idle=60";
  const auto keys = keywords_of(db);
  CHECK(keys.at("options") == "-c search_path=x -c statement_timeout=30000 -c jit=off");
  CHECK(keys.count("keepalives_idle") == 0);  // the URL's 60 stays in force
}

TEST_CASE("connect_params sends no startup options through a pooler, which would refuse them", "[pg]") {
  config::DatabaseConfig db;
  db.url = "postgresql://u@pooler:6432/app";
  db.pooler = GENERATE(config::Pooler::session, config::Pooler::transaction);
  const auto keys = keywords_of(db);
  CHECK(keys.count("options") == 0);
  CHECK(keys.at("application_name") == "outboxd test");
}

TEST_CASE("connect_params rejects a malformed URL without quoting it", "[pg]") {
  config::DatabaseConfig db;
  db.url = "postgresql://u:hunter2%zz@h/app";
  auto params = pg::connect_params(db, "x");
  REQUIRE_FALSE(params.ok());
  CHECK(params.error().kind == core::ErrorKind::fatal);
  CHECK(params.error().message.find("hunter2") == std::string::npos);
}
