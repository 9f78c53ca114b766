// Connection against a real server: settings, parameters, error kinds, prepared statements, reconnects, a silent server.
// The superuser's connections: these test the libpq adapter, not what a role may do.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <limits>

#include <optional>
#include <thread>

#include "config/url.hpp"
#include "pg/connection.hpp"
#include "scratch_database.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;

TEST_CASE("open sets application_name and statement_timeout for the connection", "[pg][connection]") {
  ScratchDatabase db;
  config::DatabaseConfig config = db.config();
  config.statement_timeout = std::chrono::milliseconds(1234);
  auto connection = Connection::open(config, "outboxd unit-7");
  REQUIRE(connection.ok());
  CHECK(connection.value().ok());
  CHECK(connection.value().socket() >= 0);
  CHECK(must(connection.value(), "SHOW application_name").text(0, 0) == "outboxd unit-7");
  CHECK(must(connection.value(), "SHOW statement_timeout").text(0, 0) == "1234ms");
  CHECK(must(connection.value(), "SHOW client_encoding").text(0, 0) == "UTF8");
}

TEST_CASE("a closed connection's backend has left the server when the close returns", "[pg][connection]") {
  // A daemon within a connection budget closes one and opens the next at
  // once; the server must not count both. Repeated: without the wait, the
  // backend is usually still listed a moment after PQfinish().
  ScratchDatabase db;
  auto observer = Connection::open(db.config(), "observer");
  REQUIRE(observer.ok());
  for (int i = 0; i < 20; ++i) {
    std::string pid;
    {
      auto closed = Connection::open(db.config(), "closed");
      REQUIRE(closed.ok());
      pid = must(closed.value(), "SELECT pg_backend_pid()").text(0, 0);
    }
    CHECK(must(observer.value(), "SELECT count(*) FROM pg_stat_activity WHERE pid = " + pid).text(0, 0) == "0");
  }
}

TEST_CASE("open classifies what cannot succeed by retrying as fatal", "[pg][connection]") {
  ScratchDatabase db;
  config::DatabaseConfig config = db.config();
  SECTION("a database that does not exist") {
    REQUIRE(config::set_database_url(config, config.url + "_missing"));  // the database name is last in the URL
    auto connection = Connection::open(config, "x");
    REQUIRE_FALSE(connection.ok());
    CHECK(connection.error().kind == core::ErrorKind::fatal);
    CHECK_THAT(connection.error().message, Catch::Contains("does not exist"));
  }
  SECTION("an option value libpq refuses, before it tries any host") {
    REQUIRE(config::set_database_url(config, config.url + "?sslmode=sometimes"));
    auto connection = Connection::open(config, "x");
    REQUIRE_FALSE(connection.ok());
    CHECK(connection.error().kind == core::ErrorKind::fatal);
    CHECK_THAT(connection.error().message, Catch::Contains("sslmode"));
  }
  SECTION("nothing listening is transient") {
    REQUIRE(config::set_database_url(config, "postgresql://postgres@127.0.0.1:1/postgres"));
    auto connection = Connection::open(config, "x");
    REQUIRE_FALSE(connection.ok());
    CHECK(connection.error().kind == core::ErrorKind::transient);
  }
  SECTION("nothing listening on any host of a list is transient") {
    REQUIRE(config::set_database_url(config, "postgresql://postgres@127.0.0.1:1,127.0.0.1:2/postgres"));
    auto connection = Connection::open(config, "x");
    REQUIRE_FALSE(connection.ok());
    CHECK(connection.error().kind == core::ErrorKind::transient);
  }
}

TEST_CASE("statements bind every parameter, NULL included", "[pg][connection]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  const Rows rows = must(connection, "SELECT $1::text, $2::int + 1, $3::text IS NULL, cardinality($4::bigint[])",
                         {"it's \"quoted\"; --", "41", std::nullopt, "{1,2,3}"});
  CHECK(rows.text(0, 0) == "it's \"quoted\"; --");
  CHECK(rows.int64(0, 1) == 42);
  CHECK(rows.boolean(0, 2));
  CHECK(rows.int64(0, 3) == 3);
  CHECK(rows.optional_text(0, 0).has_value());
  const Rows nulls = must(connection, "SELECT NULL::text, NULL::bigint");
  CHECK_FALSE(nulls.optional_text(0, 0).has_value());
  CHECK_FALSE(nulls.optional_int64(0, 1).has_value());
}

TEST_CASE("binary-format results read as their text-format twins", "[pg][connection]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  const std::string sql =
      "SELECT $1::bigint, -$1::bigint, (-2147483648)::int, 32767::smallint, (-32768)::smallint, true, false, "
      "'\\x00ff7f80'::bytea, 'tëxt'::text, '{\"k\": 1}'::jsonb::text, NULL::bigint, NULL::boolean, NULL::bytea";
  connection.define("every_type", sql);
  auto text = connection.exec_prepared("every_type", {"9223372036854775807"});
  auto binary = connection.exec_prepared("every_type", {"9223372036854775807"}, ResultFormat::binary);
  REQUIRE(text.ok());
  REQUIRE(binary.ok());
  const Rows& b = binary.value();
  CHECK(b.int64(0, 0) == std::numeric_limits<std::int64_t>::max());
  CHECK(b.int64(0, 1) == -std::numeric_limits<std::int64_t>::max());
  CHECK(b.int64(0, 2) == std::numeric_limits<std::int32_t>::min());
  CHECK(b.int64(0, 3) == 32767);
  CHECK(b.int64(0, 4) == -32768);
  CHECK(b.boolean(0, 5));
  CHECK_FALSE(b.boolean(0, 6));
  CHECK(b.text(0, 7) == std::string_view("\x00\xff\x7f\x80", 4));
  CHECK(text.value().text(0, 7) == "\\x00ff7f80");  // text format: hex
  CHECK(b.text(0, 8) == "tëxt");
  CHECK(b.text(0, 9) == "{\"k\": 1}");
  CHECK_FALSE(b.optional_int64(0, 10).has_value());
  CHECK_FALSE(b.boolean(0, 11));
  CHECK(b.is_null(0, 12));
  for (int column : {0, 1, 2, 3, 4}) CHECK(b.int64(0, column) == text.value().int64(0, column));
  for (int column : {5, 6, 11}) CHECK(b.boolean(0, column) == text.value().boolean(0, column));
  for (int column : {8, 9}) CHECK(b.text(0, column) == text.value().text(0, column));
}

TEST_CASE("errors carry SQLSTATE, message and detail, and the classifier's kind", "[pg][connection]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  auto missing = connection.exec("SELECT * FROM nowhere.messages");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().kind == core::ErrorKind::fatal);
  CHECK_THAT(missing.error().message, Catch::StartsWith("[42P01] relation \"nowhere.messages\" does not exist"));
  CHECK(connection.last_failure().sqlstate == "42P01");

  auto bad_value = connection.exec_params("SELECT $1::int", {"forty-two"});
  REQUIRE_FALSE(bad_value.ok());
  CHECK(bad_value.error().kind == core::ErrorKind::rejected);

  must(connection, "CREATE TABLE t (id int PRIMARY KEY)");
  must(connection, "INSERT INTO t VALUES (1)");
  auto duplicate = connection.exec("INSERT INTO t VALUES (1)");
  REQUIRE_FALSE(duplicate.ok());
  CHECK(duplicate.error().kind == core::ErrorKind::rejected);
  CHECK_THAT(duplicate.error().message, Catch::Contains("detail: Key (id)=(1) already exists."));
  CHECK_FALSE(connection.last_failure().outcome_unknown);

  auto timeout = connection.exec("SET statement_timeout = 50; SELECT pg_sleep(1)");
  REQUIRE_FALSE(timeout.ok());
  CHECK(timeout.error().kind == core::ErrorKind::transient);
  CHECK(connection.last_failure().sqlstate == "57014");
  CHECK(connection.ok());
}

TEST_CASE("prepared statements are prepared once per connection, again after a reconnect", "[pg][connection]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  connection.define("double", "SELECT $1::int * 2");
  auto first = connection.exec_prepared("double", {"21"});
  REQUIRE(first.ok());
  CHECK(first.value().int64(0, 0) == 42);
  CHECK(must(connection, "SELECT count(*) FROM pg_prepared_statements WHERE name = 'double'").int64(0, 0) == 1);

  terminate_backend(connection);
  auto lost = connection.exec_prepared("double", {"1"});
  REQUIRE_FALSE(lost.ok());
  CHECK(lost.error().kind == core::ErrorKind::transient);
  CHECK(connection.last_failure().connection_lost);
  CHECK_FALSE(connection.ok());
  CHECK(connection.socket() == -1);
  auto still_down = connection.exec("SELECT 1");
  REQUIRE_FALSE(still_down.ok());
  CHECK(still_down.error().kind == core::ErrorKind::transient);

  REQUIRE(connection.reset().ok());
  auto again = connection.exec_prepared("double", {"5"});
  REQUIRE(again.ok());
  CHECK(again.value().int64(0, 0) == 10);

  SECTION("a statement the server forgot (DISCARD ALL) is prepared again") {
    must(connection, "DISCARD ALL");
    auto after_discard = connection.exec_prepared("double", {"4"});
    REQUIRE(after_discard.ok());
    CHECK(after_discard.value().int64(0, 0) == 8);
  }
  SECTION("redefining a name with other text replaces the statement") {
    connection.define("double", "SELECT $1::int * 3");
    auto tripled = connection.exec_prepared("double", {"4"});
    REQUIRE(tripled.ok());
    CHECK(tripled.value().int64(0, 0) == 12);
  }
  SECTION("an unknown name is an error, not a crash") {
    auto unknown = connection.exec_prepared("nope", {});
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.error().kind == core::ErrorKind::fatal);
  }
}

TEST_CASE("a connection lost at COMMIT reports the outcome as unknown", "[pg][connection]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  must(connection, "CREATE TABLE t (id int)");
  must(connection, "BEGIN");
  must(connection, "INSERT INTO t VALUES (1)");
  terminate_backend(connection);

  SECTION("COMMIT") {
    auto commit = connection.exec("COMMIT");
    REQUIRE_FALSE(commit.ok());
    CHECK(commit.error().kind == core::ErrorKind::transient);
    CHECK(connection.last_failure().outcome_unknown);
    CHECK_THAT(commit.error().message, Catch::Contains("outcome unknown"));
  }
  SECTION("a statement inside the open transaction: it surely rolled back") {
    auto insert = connection.exec("INSERT INTO t VALUES (2)");
    REQUIRE_FALSE(insert.ok());
    CHECK(connection.last_failure().connection_lost);
    CHECK_FALSE(connection.last_failure().outcome_unknown);
  }
}

namespace {

// Reads the listener's input for up to 2 s; true once a notification arrived.
bool notified_within_2s(Connection& listener) {
  for (int i = 0; i < 100; ++i) {
    auto got = listener.consume_input_and_notifications();
    REQUIRE(got.ok());
    if (got.value()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace

TEST_CASE("LISTEN survives a reset and notifications are read without blocking", "[pg][connection]") {
  ScratchDatabase db;
  Connection listener = db.connect();
  Connection sender = db.connect();
  REQUIRE(listener.listen("Mixed_Case").ok());
  auto none = listener.consume_input_and_notifications();
  REQUIRE(none.ok());
  CHECK_FALSE(none.value());

  must(sender, "SELECT pg_notify('Mixed_Case', 'x')");
  CHECK(notified_within_2s(listener));

  terminate_backend(listener);
  // The server's goodbye may be read before the end of the stream is seen.
  std::optional<core::Error> lost;
  for (int i = 0; i < 100 && !lost; ++i) {
    auto got = listener.consume_input_and_notifications();
    if (!got) lost = got.error();
    else std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(lost.has_value());
  CHECK(lost->kind == core::ErrorKind::transient);
  REQUIRE(listener.reset().ok());
  must(sender, "SELECT pg_notify('Mixed_Case', 'y')");
  CHECK(notified_within_2s(listener));
}

TEST_CASE("a pipeline runs its statements in one transaction and reports the first error", "[pg][connection][pipeline]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  must(connection, "CREATE TABLE t (v int PRIMARY KEY)");
  connection.define("insert", "INSERT INTO t VALUES ($1::int) RETURNING v * 10");
  connection.define("count", "SELECT count(*) FROM t");
  connection.define("now", "SELECT now()::text");

  auto ok = connection.exec_prepared_pipeline({{"insert", {"1"}}, {"insert", {"2"}}, {"count", {}}});
  REQUIRE(ok.ok());
  REQUIRE(ok.value().size() == 3);
  CHECK(ok.value()[0].int64(0, 0) == 10);
  CHECK(ok.value()[1].int64(0, 0) == 20);
  CHECK(ok.value()[2].int64(0, 0) == 2);

  auto same_now = connection.exec_prepared_pipeline({{"now", {}}, {"count", {}}, {"now", {}}});
  REQUIRE(same_now.ok());
  CHECK(same_now.value()[0].text(0, 0) == same_now.value()[2].text(0, 0));

  SECTION("a failing statement rolls back the ones before it; the connection goes on") {
    auto failed = connection.exec_prepared_pipeline({{"insert", {"3"}}, {"insert", {"1"}}, {"insert", {"4"}}});
    REQUIRE_FALSE(failed.ok());
    CHECK(connection.last_failure().sqlstate == "23505");
    CHECK_THAT(failed.error().message, Catch::Contains("duplicate key"));
    CHECK(must(connection, "SELECT count(*) FROM t").int64(0, 0) == 2);
    auto after = connection.exec_prepared("count", {});
    REQUIRE(after.ok());
    CHECK(after.value().int64(0, 0) == 2);
  }
  SECTION("statements the server forgot are prepared again") {
    must(connection, "DISCARD ALL");
    auto again = connection.exec_prepared_pipeline({{"insert", {"5"}}, {"count", {}}});
    REQUIRE(again.ok());
    CHECK(again.value()[1].int64(0, 0) == 3);
  }
  SECTION("a lost connection is transient and the next pipeline works after reset") {
    terminate_backend(connection);
    auto lost = connection.exec_prepared_pipeline({{"count", {}}, {"count", {}}});
    REQUIRE_FALSE(lost.ok());
    CHECK(lost.error().kind == core::ErrorKind::transient);
    CHECK(connection.last_failure().connection_lost);
    REQUIRE(connection.reset().ok());
    auto back = connection.exec_prepared_pipeline({{"count", {}}});
    REQUIRE(back.ok());
    CHECK(back.value()[0].int64(0, 0) == 2);
  }
  SECTION("an unknown name is an error before anything is sent") {
    auto unknown = connection.exec_prepared_pipeline({{"insert", {"9"}}, {"nope", {}}});
    REQUIRE_FALSE(unknown.ok());
    CHECK(must(connection, "SELECT count(*) FROM t").int64(0, 0) == 2);
  }
}

TEST_CASE("a statement name prepared already on the server connection says to set database.pooler", "[pg][connection]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  // What a pooler in transaction mode does to a daemon configured without it:
  // the server connection it lends holds another client's statements.
  must(connection, "PREPARE \"outboxd.outbox.claim_immediate\" AS SELECT 1");
  auto prepared = connection.prepare("outboxd.outbox.claim_immediate", "SELECT 2");
  REQUIRE_FALSE(prepared.ok());
  CHECK_THAT(prepared.error().message,
             Catch::Contains("[42P05]") && Catch::Contains("set `database.pooler: transaction`"));
}

// A stopped backend answers nothing while the kernel keeps its TCP connection
// up, as a half-open link through a proxy does: statement_timeout cannot fire,
// only the client's own wait ends it.
TEST_CASE("a connection whose server stops answering is given up after statement_timeout + connect_timeout",
          "[pg][connection]") {
  ScratchDatabase db;
  config::DatabaseConfig config = db.config();
  config.statement_timeout = std::chrono::milliseconds(500);
  config.connect_timeout = std::chrono::milliseconds(500);
  auto opened = Connection::open(config, "stall");
  REQUIRE(opened.ok());
  Connection connection = std::move(opened).value();
  REQUIRE(connection.prepare("one", "SELECT 1").ok());
  struct Resume {
    pid_t backend;
    ~Resume() { kill(backend, SIGCONT); }
  } resume{static_cast<pid_t>(must(connection, "SELECT pg_backend_pid()").int64(0, 0))};
  REQUIRE(kill(resume.backend, SIGSTOP) == 0);  // as root or as the server's user, like the suite
  const auto started = std::chrono::steady_clock::now();
  std::optional<core::Error> error;
  SECTION("a statement") {
    auto rows = connection.exec_params("SELECT $1::int", {"1"});
    REQUIRE_FALSE(rows.ok());
    error = rows.error();
  }
  SECTION("a pipeline") {
    auto rows = connection.exec_prepared_pipeline({{"one", {}}, {"one", {}}});
    REQUIRE_FALSE(rows.ok());
    error = rows.error();
  }
  const auto waited = std::chrono::steady_clock::now() - started;
  CHECK(error->kind == core::ErrorKind::transient);
  // 500 ms, and connect_timeout as libpq applies it: 2 s at least.
  CHECK_THAT(error->message, Catch::Contains("no reply from PostgreSQL within 2500 ms"));
  CHECK(connection.last_failure().connection_lost);
  CHECK_FALSE(connection.ok());
  CHECK(waited >= std::chrono::milliseconds(2500));
  CHECK(waited < std::chrono::milliseconds(4500));
  kill(resume.backend, SIGCONT);
  REQUIRE(connection.reset().ok());
  CHECK(must(connection, "SELECT 1").int64(0, 0) == 1);
}
