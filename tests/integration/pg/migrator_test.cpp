// migrate against a real database: fresh install, re-run, dry run, concurrency, edited and newer scripts.
//
// As the superuser on purpose: `outboxd migrate` creates schemas and roles, which
// the dispatcher role may not (the deployment runs it as the database's owner).
#include <catch2/catch.hpp>

#include <algorithm>
#include <iterator>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "pg/migrator.hpp"
#include "scratch_database.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;

namespace {

std::int64_t count(Connection& connection, const std::string& sql) { return must(connection, sql).int64(0, 0); }

bool schema_exists(Connection& connection, const std::string& schema) {
  return must(connection, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", {schema}).boolean(0, 0);
}

}  // namespace

TEST_CASE("migrate installs both schemas and records every script", "[pg][migrate]") {
  REQUIRE_FALSE(migrations().empty());
  ScratchDatabase db;
  Connection connection = db.connect();
  auto report = migrate(connection, ScratchDatabase::default_options());
  REQUIRE(report.ok());
  CHECK(report.value().count(MigrationState::applied_now) == static_cast<int>(migrations().size()));
  CHECK(report.value().version_before == 0);
  CHECK(report.value().version_after == migrations().back().version);
  CHECK(schema_exists(connection, "outbox"));
  CHECK(schema_exists(connection, "workflow"));
  CHECK(count(connection, "SELECT count(*) FROM outbox.schema_migrations") ==
        static_cast<std::int64_t>(migrations().size()));
  const Rows recorded = must(connection, "SELECT version, name, checksum, applied_by FROM outbox.schema_migrations "
                                         "ORDER BY version");
  for (int i = 0; i < recorded.size(); ++i) {
    const Migration& m = migrations()[static_cast<std::size_t>(i)];
    CHECK(recorded.int64(i, 0) == m.version);
    CHECK(recorded.text(i, 1) == m.name);
    CHECK(recorded.text(i, 2) == m.checksum);
    CHECK(recorded.text(i, 3) == "postgres");
  }
  CHECK(count(connection, "SELECT partition_count FROM outbox.settings") == 8);
  CHECK(count(connection, "SELECT count(*) FROM outbox.leases") == 8);
  // The session is handed back with its search_path as before.
  CHECK(must(connection, "SHOW search_path").text(0, 0) == "\"$user\", public");
  auto version = applied_version(connection, "outbox");
  REQUIRE(version.ok());
  CHECK(version.value() == migrations().back().version);
}

TEST_CASE("migrate again applies nothing and says so", "[pg][migrate]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  const std::string last_applied = "SELECT max(applied_at)::text FROM outbox.schema_migrations";
  const auto applied_at = std::string(must(connection, last_applied).text(0, 0));
  auto again = migrate(connection, ScratchDatabase::default_options());
  REQUIRE(again.ok());
  CHECK(again.value().count(MigrationState::applied_now) == 0);
  CHECK(again.value().count(MigrationState::already_applied) == static_cast<int>(migrations().size()));
  CHECK(again.value().version_before == again.value().version_after);
  CHECK(must(connection, last_applied).text(0, 0) == applied_at);
}

TEST_CASE("a dry run changes nothing and lists what it would apply", "[pg][migrate]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  MigrateOptions options = ScratchDatabase::default_options();
  options.dry_run = true;

  SECTION("on an empty database") {
    auto report = migrate(connection, options);
    REQUIRE(report.ok());
    CHECK(report.value().dry_run);
    CHECK(report.value().count(MigrationState::would_apply) == static_cast<int>(migrations().size()));
    CHECK_FALSE(schema_exists(connection, "outbox"));
    auto version = applied_version(connection, "outbox");
    REQUIRE(version.ok());
    CHECK_FALSE(version.value().has_value());
  }
  SECTION("on a migrated database it still validates checksums") {
    options.dry_run = false;
    REQUIRE(migrate(connection, options).ok());
    options.dry_run = true;
    auto report = migrate(connection, options);
    REQUIRE(report.ok());
    CHECK(report.value().count(MigrationState::already_applied) == static_cast<int>(migrations().size()));
    must(connection, "UPDATE outbox.schema_migrations SET checksum = 'abc' WHERE version = 1");
    auto refused = migrate(connection, options);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message.find("was edited after it was applied") != std::string::npos);
  }
}

TEST_CASE("two concurrent migrate runs both succeed and apply each script once", "[pg][migrate]") {
  ScratchDatabase db;
  Connection first = db.connect("migrate-1");
  Connection second = db.connect("migrate-2");
  std::optional<core::Result<MigrationReport>> a;
  std::optional<core::Result<MigrationReport>> b;
  std::thread one([&] { a.emplace(migrate(first, ScratchDatabase::default_options())); });
  std::thread two([&] { b.emplace(migrate(second, ScratchDatabase::default_options())); });
  one.join();
  two.join();
  REQUIRE(a->ok());
  REQUIRE(b->ok());
  const int total = static_cast<int>(migrations().size());
  CHECK(a->value().count(MigrationState::applied_now) + b->value().count(MigrationState::applied_now) == total);
  CHECK(a->value().count(MigrationState::applied_now) + a->value().count(MigrationState::already_applied) == total);
  CHECK(count(first, "SELECT count(*) FROM outbox.schema_migrations") == total);
}

TEST_CASE("an applied script that was edited is refused with its name and both checksums", "[pg][migrate]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  const Migration& first = migrations().front();
  must(connection, "UPDATE outbox.schema_migrations SET checksum = 'deadbeef' WHERE version = $1",
       {std::to_string(first.version)});
  auto refused = migrate(connection, ScratchDatabase::default_options());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().kind == core::ErrorKind::fatal);
  CHECK_THAT(refused.error().message,
             Catch::Contains("migration " + first.name + " was edited after it was applied (checksum deadbeef != " +
                             first.checksum + ")"));
}

TEST_CASE("a database newer than the binary is refused", "[pg][migrate]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  const std::vector<Migration> older(migrations().begin(), migrations().begin() + 1);
  auto refused = migrate(connection, ScratchDatabase::default_options(), older);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message,
             Catch::Contains("database is at version " + std::to_string(migrations().back().version) +
                             ", this binary knows up to " + std::to_string(older.back().version)));
}

TEST_CASE("a new script on top of an installed database is applied alone", "[pg][migrate]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  std::vector<Migration> next = migrations();
  const int version = next.back().version + 1;
  next.push_back({version, std::to_string(version) + "_extra.sql",
                  "CREATE TABLE extra (id int);\nCOMMENT ON TABLE extra IS 'from a test';\n", "feed"});
  // The scripts run with search_path = <schema> set by 001; a new one relies on its own.
  next.back().sql = "SET LOCAL search_path = outbox;\n" + next.back().sql;
  auto report = migrate(connection, ScratchDatabase::default_options(), next);
  REQUIRE(report.ok());
  CHECK(report.value().count(MigrationState::applied_now) == 1);
  CHECK(report.value().steps.back().state == MigrationState::applied_now);
  CHECK(count(connection, "SELECT count(*) FROM outbox.extra") == 0);
}

TEST_CASE("a failing script rolls back completely and names the script and line", "[pg][migrate]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  std::vector<Migration> next = migrations();
  const int version = next.back().version + 1;
  next.push_back({version, std::to_string(version) + "_broken.sql",
                  "CREATE TABLE outbox.half (id int);\nSELECT 1;\nSELEC 2;\n", "feed"});
  auto failed = migrate(connection, ScratchDatabase::default_options(), next);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().kind == core::ErrorKind::fatal);
  CHECK_THAT(failed.error().message, Catch::Contains(next.back().name));
  CHECK_THAT(failed.error().message, Catch::Contains("[42601]"));
  CHECK_THAT(failed.error().message, Catch::Contains("at line 3"));
  CHECK(must(connection, "SELECT to_regclass('outbox.half') IS NULL").boolean(0, 0));
  CHECK(count(connection, "SELECT max(version) FROM outbox.schema_migrations") == migrations().back().version);
}

TEST_CASE("each script gives the session its search_path back in its own transaction", "[pg][migrate]") {
  // Behind a transaction pooler the next statement may run on another server
  // session: a path reset only at the end (or never, after a failure) would
  // stay behind for another client. A failed run shows it without a pooler.
  ScratchDatabase db;
  Connection connection = db.connect();
  std::vector<Migration> next = migrations();
  const int version = next.back().version + 1;
  next.push_back({version, std::to_string(version) + "_broken.sql", "SELEC 1;\n", "feed"});
  REQUIRE_FALSE(migrate(connection, ScratchDatabase::default_options(), next).ok());
  CHECK(count(connection, "SELECT max(version) FROM outbox.schema_migrations") == migrations().back().version);
  CHECK(must(connection, "SHOW search_path").text(0, 0) == "\"$user\", public");
}

// Reserved words pass the schema-name rule; only quoting makes them work.
TEST_CASE("schema names from config are quoted everywhere", "[pg][migrate]") {
  ScratchDatabase db;
  MigrateOptions options;
  options.schema = "order";
  options.workflow_schema = "user";
  options.partitions = 4;
  Connection connection = db.migrated(options);
  CHECK(schema_exists(connection, "order"));
  CHECK(schema_exists(connection, "user"));
  CHECK(count(connection, "SELECT count(*) FROM \"order\".schema_migrations") ==
        static_cast<std::int64_t>(migrations().size()));
  CHECK(count(connection, "SELECT count(*) FROM \"order\".leases") == 4);
  auto again = migrate(connection, options);
  REQUIRE(again.ok());
  CHECK(again.value().count(MigrationState::applied_now) == 0);
}

TEST_CASE("migrate refuses bad options before touching the database", "[pg][migrate]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  MigrateOptions options;
  options.partitions = 0;
  CHECK_FALSE(migrate(connection, options).ok());
  CHECK_FALSE(schema_exists(connection, "outbox"));
}

// The config's rule, word for word: a name the config refuses, migrate refuses too.
TEST_CASE("migrate refuses the schema names the config refuses, with the config's words", "[pg][migrate]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  const std::string longest_outbox(52, 'o');
  for (const auto& [schema, workflow, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"Billing Outbox", "workflow", "outbox.schema must be a lower-case SQL identifier ([a-z_][a-z0-9_]*, "
                                          "at most 52 bytes), got \"Billing Outbox\""},
           {longest_outbox + "o", "workflow", "outbox.schema must be a lower-case SQL identifier"},
           {"outbox", "billing\"flows", "outbox.workflow_schema must be a lower-case SQL identifier"},
           {"outbox", std::string(64, 'w'),
            "outbox.workflow_schema must be a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 63 bytes)"},
           {"outbox", "pg_flows", "outbox.workflow_schema must not start with \"pg_\""}}) {
    INFO(schema << " / " << workflow);
    MigrateOptions options;
    options.schema = schema;
    options.workflow_schema = workflow;
    const auto refused = migrate(connection, options);
    REQUIRE_FALSE(refused.ok());
    CHECK_THAT(refused.error().message, Catch::StartsWith(message));
    CHECK_FALSE(schema_exists(connection, schema));
  }
  MigrateOptions longest;
  longest.schema = longest_outbox;
  longest.workflow_schema = std::string(63, 'w');
  REQUIRE(migrate(connection, longest).ok());
  CHECK(schema_exists(connection, longest_outbox));
}

TEST_CASE("inbox and workflow rows from before writers were kept apart need their writer named", "[pg][migrate]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  std::vector<Migration> before;
  std::copy_if(migrations().begin(), migrations().end(), std::back_inserter(before),
               [](const Migration& m) { return m.version < 23; });  // 023_writer_rows.sql adds the writer
  REQUIRE(migrate(connection, ScratchDatabase::default_options(), before).ok());
  must(connection, "SELECT workflow.start('order-1', 'order', 'New'), outbox.record_received('stock', 'm-1')");
  must(connection, "DROP ROLE IF EXISTS legacy_app_migrate_test");
  must(connection, "CREATE ROLE legacy_app_migrate_test IN ROLE outbox_writer");
  struct DropRole {
    Connection& connection;
    ~DropRole() { must(connection, "DROP ROLE legacy_app_migrate_test"); }
  } drop{connection};

  auto refused = migrate(connection, ScratchDatabase::default_options());
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("[55000]") && Catch::Contains("--legacy-writer"));

  MigrateOptions options = ScratchDatabase::default_options();
  options.legacy_writer = "legacy_app_migrate_test";
  REQUIRE(migrate(connection, options).ok());
  CHECK(must(connection, "SELECT (SELECT writer FROM workflow.instances) || ',' || "
                         "(SELECT writer FROM outbox.received_messages)")
            .text(0, 0) == "legacy_app_migrate_test,legacy_app_migrate_test");
}
