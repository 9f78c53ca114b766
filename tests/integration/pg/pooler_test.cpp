// Connection behind a pooler, checked on the server itself: what a server connection keeps, and what each transaction sets.
// The superuser's connections: these test the libpq adapter behind a pooler, not what a role may do.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "config/url.hpp"
#include "pg/connection.hpp"
#include "scratch_database.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;

namespace {

Connection open_as(const ScratchDatabase& db, config::Pooler pooler, std::chrono::milliseconds statement_timeout) {
  config::DatabaseConfig config = db.config();
  config.pooler = pooler;
  config.statement_timeout = statement_timeout;
  auto connection = Connection::open(config, "outboxd pooler-test");
  if (!connection) FAIL(connection.error().message);
  return std::move(connection).value();
}

}  // namespace

TEST_CASE("behind a transaction pooler nothing stays on the server connection and each transaction sets its own timeout",
          "[pg][connection][pooler]") {
  ScratchDatabase db;
  Connection connection = open_as(db, config::Pooler::transaction, std::chrono::milliseconds(1234));
  // The server connection itself runs with the server's defaults: the next client of
  // this server connection, behind a real pooler, finds nothing of ours.
  CHECK(must(connection, "SHOW statement_timeout").text(0, 0) == "0");
  connection.define("settings", "SELECT current_setting('statement_timeout'), current_setting('jit')");
  auto settings = connection.exec_prepared("settings", {});
  REQUIRE(settings.ok());
  CHECK(settings.value().text(0, 0) == "1234ms");
  CHECK(settings.value().text(0, 1) == "off");
  CHECK(must(connection, "SHOW statement_timeout").text(0, 0) == "0");

  connection.define("now", "SELECT now()::text");
  auto pipelined = connection.exec_prepared_pipeline({{"now", {}}, {"settings", {}}, {"now", {}}});
  REQUIRE(pipelined.ok());
  REQUIRE(pipelined.value().size() == 3);
  CHECK(pipelined.value()[0].text(0, 0) == pipelined.value()[2].text(0, 0));  // one transaction
  CHECK(pipelined.value()[1].text(0, 0) == "1234ms");
  CHECK(must(connection, "SELECT count(*) FROM pg_prepared_statements").int64(0, 0) == 0);

  SECTION("the timeout cancels a statement that runs longer") {
    Connection quick = open_as(db, config::Pooler::transaction, std::chrono::milliseconds(100));
    quick.define("slow", "SELECT pg_sleep(2)");
    auto slow = quick.exec_prepared("slow", {});
    REQUIRE_FALSE(slow.ok());
    CHECK(quick.last_failure().sqlstate == "57014");
    CHECK(quick.ok());
  }
  SECTION("prepare() still finds a missing table at start-up, and leaves no statement behind") {
    CHECK(connection.prepare("fine", "SELECT 1").ok());
    auto missing = connection.prepare("missing", "SELECT * FROM no_such_table");
    REQUIRE_FALSE(missing.ok());
    CHECK_THAT(missing.error().message, Catch::Contains("no_such_table"));
    CHECK(must(connection, "SELECT count(*) FROM pg_prepared_statements").int64(0, 0) == 0);
  }
}

TEST_CASE("behind a pooler in session mode the settings are set after connecting, not in the startup packet",
          "[pg][connection][pooler]") {
  ScratchDatabase db;
  Connection connection = open_as(db, config::Pooler::session, std::chrono::milliseconds(4321));
  CHECK(must(connection, "SHOW statement_timeout").text(0, 0) == "4321ms");
  CHECK(must(connection, "SHOW jit").text(0, 0) == "off");
  CHECK(must(connection, "SHOW plan_cache_mode").text(0, 0) == "force_generic_plan");
  CHECK(must(connection, "SHOW enable_seqscan").text(0, 0) == "off");
  CHECK(must(connection, "SHOW enable_bitmapscan").text(0, 0) == "off");
  // Set with SET, not as startup options: RESET (and DISCARD ALL, the
  // pooler's reset query) gives the next client the server's defaults.
  must(connection, "RESET ALL");
  CHECK(must(connection, "SHOW statement_timeout").text(0, 0) == "0");
  REQUIRE(connection.reset().ok());
  CHECK(must(connection, "SHOW statement_timeout").text(0, 0) == "4321ms");
}

TEST_CASE("through PgBouncer in transaction mode a pipeline is one transaction on one server connection",
          "[pg][connection][pooler]") {
  const char* pooler = std::getenv("OUTBOXD_TEST_PGBOUNCER_TX_URL");
  if (pooler == nullptr || *pooler == '\0') {
    const char* required = std::getenv("OUTBOXD_REQUIRE_SERVICES");
    if (required != nullptr && std::strcmp(required, "1") == 0) FAIL("OUTBOXD_TEST_PGBOUNCER_TX_URL is not set");
    WARN("OUTBOXD_TEST_PGBOUNCER_TX_URL is not set: skipped");
    return;
  }
  ScratchDatabase db;
  config::DatabaseConfig config = db.config();
  const std::string url(pooler);  // postgresql://user@host:port/database, from scripts/services.sh
  REQUIRE(config::set_database_url(config, url.substr(0, url.rfind('/') + 1) + db.name()));
  config.pooler = config::Pooler::transaction;
  // More clients than the pool has server connections, so that they take turns.
  constexpr int kClients = 6;
  constexpr int kPipelines = 150;
  std::atomic<int> failed{0};
  std::atomic<int> split{0};
  std::mutex mutex;
  std::set<std::string> servers;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      auto connection = Connection::open(config, "outboxd pooler-test");
      if (!connection) return void(++failed);
      connection.value().define("where", "SELECT txid_current() || '/' || pg_backend_pid(), pg_backend_pid()::text");
      for (int i = 0; i < kPipelines; ++i) {
        auto rows = connection.value().exec_prepared_pipeline({{"where", {}}, {"where", {}}, {"where", {}}});
        if (!rows) {
          ++failed;
          continue;
        }
        const auto& r = rows.value();
        if (r[0].text(0, 0) != r[1].text(0, 0) || r[1].text(0, 0) != r[2].text(0, 0)) ++split;
        const std::lock_guard lock(mutex);
        servers.emplace(r[0].text(0, 1));
      }
    });
  }
  for (auto& client : clients) client.join();
  CHECK(failed == 0);
  CHECK(split == 0);
  CHECK(servers.size() < static_cast<std::size_t>(kClients));
}
