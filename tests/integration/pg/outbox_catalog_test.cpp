// The catalog query against a real server: columns by name, bad rows left out, read-only, bounded in rows and time.
// The superuser's connection: these test the reader, not what a role may do (the CLI's test does).
#include <catch2/catch.hpp>

#include "config/url.hpp"
#include "pg/outbox_catalog.hpp"
#include "scratch_database.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;

namespace {

config::Config catalog_config(const ScratchDatabase& db, std::string query) {
  config::Config config;
  config.database = db.config();
  config.tenants.catalog.query = std::move(query);
  config.tenants.catalog.database = config.database;
  return config;
}

std::vector<std::string> names(const std::vector<config::OutboxEntry>& entries) {
  std::vector<std::string> out;
  for (const auto& entry : entries) out.push_back(entry.name);
  return out;
}

std::int64_t tenant_rows(Connection& connection) { return must(connection, "SELECT count(*) FROM tenants").int64(0, 0); }

}  // namespace

TEST_CASE("the catalog's rows become outboxes; a bad row is left out and said, the others kept", "[pg][catalog]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  must(connection,
       "CREATE TABLE tenants (name text, url text, schema text);"
       "INSERT INTO tenants VALUES ('acme', NULL, NULL), ('bad name', NULL, 'x'), "
       "('globex', 'host=db2 dbname=globex', 'globex'), ('hooli', 'mysql://u:hunter2@db/h', NULL)");
  auto read = read_outbox_catalog(connection, catalog_config(db, "SELECT schema, name, url FROM tenants ORDER BY name"));
  REQUIRE(read.ok());
  CHECK(names(read.value().entries) == std::vector<std::string>{"acme", "globex"});
  CHECK(read.value().entries[0].database.url == db.config().url);
  CHECK(read.value().entries[0].outbox.schema == "outbox");
  CHECK(read.value().entries[1].database.target.get("host") == "db2");
  CHECK(read.value().entries[1].outbox.schema == "globex");
  CHECK(read.value().problems ==
        std::vector<std::string>{
            "catalog row 2: name must be 1 to 63 characters of A-Z, a-z, 0-9, _, . and -, got \"bad name\"",
            "catalog row 4: \"hooli\": url a libpq URI must start with postgresql:// or postgres://"});
}

TEST_CASE("resolve_outboxes puts the list first and leaves out a catalog row it names", "[pg][catalog]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  config::Config config = catalog_config(db, "VALUES ('acme'), ('globex')");
  REQUIRE_FALSE(read_outbox_catalog(connection, config).ok());  // VALUES names its column column1
  config.tenants.catalog.query =
      "SELECT * FROM (VALUES ('acme', 'a', 'a_w'), ('globex', 'g', 'g_w')) AS t (name, schema, workflow_schema)";
  config.outboxes = {{"acme", config.database, config.outbox}};
  auto set = resolve_outboxes(config, &connection);
  REQUIRE(set.ok());
  CHECK(names(set.value().entries) == std::vector<std::string>{"acme", "globex"});
  CHECK(set.value().entries[0].outbox.schema == "outbox");
  CHECK(set.value().entries[1].outbox.workflow_schema == "g_w");
  CHECK(set.value().problems ==
        std::vector<std::string>{"catalog: \"acme\" is in outboxes: too; the list's entry is used"});
  CHECK(names(resolve_outboxes(config, nullptr).value().entries) == std::vector<std::string>{"acme"});
}

TEST_CASE("the catalog query can neither write nor run a second statement", "[pg][catalog]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  must(connection,
       "CREATE TABLE tenants (name text); INSERT INTO tenants VALUES ('acme');"
       "CREATE FUNCTION sneaky() RETURNS text LANGUAGE sql AS $$ INSERT INTO tenants VALUES ('x') RETURNING name $$");
  for (const char* query : {"SELECT sneaky() AS name", "DELETE FROM tenants RETURNING name",
                            "SELECT name FROM tenants; DROP TABLE tenants",
                            "WITH gone AS (DELETE FROM tenants RETURNING name) SELECT name FROM gone"}) {
    INFO(query);
    auto read = read_outbox_catalog(connection, catalog_config(db, query));
    REQUIRE_FALSE(read.ok());
    CHECK(read.error().message.starts_with("catalog query: "));
    CHECK(tenant_rows(connection) == 1);  // and the connection is out of the failed transaction
  }
  auto read = read_outbox_catalog(connection, catalog_config(db, "SELECT name FROM tenants;"));
  REQUIRE(read.ok());
  CHECK(names(read.value().entries) == std::vector<std::string>{"acme"});
}

TEST_CASE("more rows than the cap refuse the catalog whole", "[pg][catalog]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  const auto config = catalog_config(db, "SELECT 'o' || i AS name FROM generate_series(1, 4) AS i");
  CHECK(read_outbox_catalog(connection, config, 4).ok());
  auto refused = read_outbox_catalog(connection, config, 3);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message == "catalog query: returns more than 3 rows; refused whole (is it the right table?)");
}

TEST_CASE("the catalog query is cancelled after the catalog database's statement_timeout", "[pg][catalog]") {
  ScratchDatabase db;
  Connection connection = db.connect();
  auto config = catalog_config(db, "SELECT 'a' AS name FROM pg_sleep(5)");
  config.tenants.catalog.database.statement_timeout = std::chrono::milliseconds(200);
  const auto started = std::chrono::steady_clock::now();
  auto read = read_outbox_catalog(connection, config);
  REQUIRE_FALSE(read.ok());
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(4));
  CHECK_THAT(read.error().message, Catch::Contains("statement timeout"));
}
