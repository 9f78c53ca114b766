// watchdog_conflict: statement_timeout plus connect_timeout against the service manager's watchdog interval.
#include <catch2/catch.hpp>

#include "config/watchdog.hpp"

using namespace outboxd::config;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE("the defaults fit a 90 s watchdog and not a 60 s one", "[config][watchdog]") {
  const DatabaseConfig defaults;
  CHECK(database_wait_bound(defaults) == milliseconds(35000));
  CHECK_FALSE(watchdog_conflict(defaults, seconds(90)));
  const auto conflict = watchdog_conflict(defaults, seconds(60));
  REQUIRE(conflict);
  CHECK(*conflict ==
        "database.statement_timeout_ms (30000 ms) plus database.connect_timeout_ms (5000 ms, applied in whole "
        "seconds) must stay within 40% of the service manager's watchdog interval (60000 ms), that is 24000 ms, or a "
        "statement waiting on a lock gets the daemon killed; set statement_timeout_ms to at most 19000 or raise "
        "WatchdogSec");
}

TEST_CASE("connect_timeout counts in whole seconds, at least 2, as libpq applies it", "[config][watchdog]") {
  DatabaseConfig database;
  database.statement_timeout = milliseconds(500);
  database.connect_timeout = milliseconds(100);
  CHECK(connect_timeout_applied(database) == seconds(2));
  CHECK(database_wait_bound(database) == milliseconds(2500));
  CHECK_FALSE(watchdog_conflict(database, milliseconds(6250)));
  CHECK(watchdog_conflict(database, milliseconds(6249)));
  database.connect_timeout = milliseconds(2100);
  CHECK(connect_timeout_applied(database) == seconds(3));
}

TEST_CASE("no statement limit never fits under a watchdog", "[config][watchdog]") {
  DatabaseConfig database;
  database.statement_timeout = milliseconds(0);
  CHECK_FALSE(database_wait_bound(database));
  const auto conflict = watchdog_conflict(database, seconds(3600));
  REQUIRE(conflict);
  CHECK(conflict->find("statement_timeout_ms is 0 (no limit)") != std::string::npos);
  CHECK(conflict->find("set statement_timeout_ms to at most 1435000") != std::string::npos);
}
