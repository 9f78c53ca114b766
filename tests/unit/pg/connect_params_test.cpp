// libpq keywords: the password travels on its own, our settings win, the URL's options survive.
#include <catch2/catch.hpp>

#include <map>

#include "config/url.hpp"
#include "pg/connect_params.hpp"

using namespace outboxd;

namespace {

std::map<std::string, std::string> keywords_of(const config::DatabaseConfig& db) {
  auto params = pg::connect_params(db, "outboxd test");
  REQUIRE(params.ok());
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : params.value().keywords) {
    INFO(key);
    CHECK(out.emplace(key, value).second);  // each keyword once: no override left to libpq's order
  }
  return out;
}

}  // namespace

TEST_CASE("connect_params keeps the password out of every other value", "[pg]") {
  config::DatabaseConfig db;
  REQUIRE(config::set_database_url(db, "postgresql://outboxd@db.example:5432/app"));
  db.password = "s3cret pass'word";
  db.statement_timeout = std::chrono::milliseconds(2500);
  db.connect_timeout = std::chrono::milliseconds(1200);
  auto params = pg::connect_params(db, "outboxd host-1");
  REQUIRE(params.ok());
  const auto& list = params.value().keywords;
  // The URL's keywords first, so that later keywords override them.
  REQUIRE(list.size() > 4);
  CHECK(list[0] == std::pair<std::string, std::string>{"user", "outboxd"});
  CHECK(list[1] == std::pair<std::string, std::string>{"dbname", "app"});
  CHECK(list[2] == std::pair<std::string, std::string>{"host", "db.example"});
  CHECK(list[3] == std::pair<std::string, std::string>{"port", "5432"});
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
  CHECK(keys.at("options") == "-c statement_timeout=2500 -c jit=off -c plan_cache_mode=force_generic_plan -c enable_seqscan=off -c enable_bitmapscan=off");
  CHECK(keys.at("keepalives_idle") == "15");
}

TEST_CASE("connect_params without a configured password leaves libpq its own sources", "[pg]") {
  config::DatabaseConfig db;
  REQUIRE(config::set_database_url(db, "host=127.0.0.1 port=5432 dbname=app user=outboxd"));
  CHECK(keywords_of(db).count("password") == 0);
}

TEST_CASE("connect_params appends to the URL's own options and respects its keepalives", "[pg]") {
  config::DatabaseConfig db;
  REQUIRE(config::set_database_url(db, "postgresql://u@h/app?options=-c%20search_path%3Dx&keepalives_idle=60"));
  const auto keys = keywords_of(db);
  CHECK(keys.at("options") == "-c search_path=x -c statement_timeout=30000 -c jit=off -c plan_cache_mode=force_generic_plan -c enable_seqscan=off -c enable_bitmapscan=off");
  CHECK(keys.at("keepalives_idle") == "60");  // the URL's, not our default
}

TEST_CASE("connect_params sends no startup options through a pooler, which would refuse them", "[pg]") {
  config::DatabaseConfig db;
  REQUIRE(config::set_database_url(db, "postgresql://u@pooler:6432/app"));
  db.pooler = GENERATE(config::Pooler::session, config::Pooler::transaction);
  const auto keys = keywords_of(db);
  CHECK(keys.count("options") == 0);
  CHECK(keys.at("application_name") == "outboxd test");
}

TEST_CASE("a malformed URL is refused without quoting it, and connect_params needs it parsed", "[pg]") {
  config::DatabaseConfig db;
  auto parsed = config::set_database_url(db, "postgresql://u:hunter2%zz@h/app");
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.error().kind == core::ErrorKind::fatal);
  CHECK(parsed.error().message.find("hunter2") == std::string::npos);
  db.url = "postgresql://u@h/app";  // set by hand: not parsed
  auto params = pg::connect_params(db, "x");
  REQUIRE_FALSE(params.ok());
  CHECK(params.error().kind == core::ErrorKind::fatal);
}
