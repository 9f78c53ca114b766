// The catalog's rows as outboxes: columns by name, each row checked as an item of outboxes: is.
#include <catch2/catch.hpp>

#include "config/catalog_rows.hpp"
#include "config/url.hpp"

using namespace outboxd::config;

namespace {


Config defaults() {
  Config config;
  REQUIRE(set_database_url(config.database, "postgresql://outboxd@db:5432/app"));
  config.database.password = "from-database";
  config.outbox.partitions = 8;
  config.tenants.catalog.query = "SELECT name FROM tenants";
  return config;
}

std::string problem(const CatalogRow& row) {
  auto entry = catalog_entry(defaults(), row);
  REQUIRE_FALSE(entry.ok());
  return entry.error().message;
}


}  // namespace

TEST_CASE("the catalog's columns are found by name: name required, the others as needed", "[config][catalog]") {
  auto columns = catalog_columns({"schema", "name"});
  REQUIRE(columns.ok());
  CHECK(columns.value().name == 1);
  CHECK(columns.value().schema == 0);
  CHECK(columns.value().url == -1);
  CHECK(columns.value().workflow_schema == -1);

  CHECK(catalog_columns({"url", "schema"}).error().message ==
        "the catalog query returns no column \"name\" (its columns: name, and as needed url, schema, workflow_schema)");
  CHECK(catalog_columns({"name", "shema"}).error().message ==
        "the catalog query returns the column \"shema\", which is none of name, url, schema, workflow_schema (did you "
        "mean \"schema\"?)");
  CHECK(catalog_columns({"name", "url", "name"}).error().message ==
        "the catalog query returns the column \"name\" twice");
}

TEST_CASE("a catalog row takes database: and outbox: for what it leaves NULL", "[config][catalog]") {
  auto entry = catalog_entry(defaults(), {"acme", std::nullopt, std::nullopt, std::nullopt});
  REQUIRE(entry.ok());
  CHECK(entry.value().name == "acme");
  CHECK(entry.value().database == defaults().database);
  CHECK(entry.value().outbox == defaults().outbox);

  entry = catalog_entry(defaults(), {"globex", "host=db2 dbname=globex user=outboxd", "globex", "globex_workflow"});
  REQUIRE(entry.ok());
  CHECK(entry.value().database.target.get("host") == "db2");
  CHECK(entry.value().database.password == "from-database");
  CHECK(entry.value().outbox.schema == "globex");
  CHECK(entry.value().outbox.workflow_schema == "globex_workflow");
  CHECK(entry.value().outbox.partitions == 8);
}

TEST_CASE("a row with a url of its own does not take database.listen_url", "[config][catalog]") {
  Config config = defaults();
  config.database.pooler = Pooler::transaction;
  config.database.listen_url = "postgresql://outboxd@db:5432/app";
  config.database.listen_target = parse_pg_url(config.database.listen_url).value();
  auto same = catalog_entry(config, {"a", std::nullopt, "a", "a_workflow"});
  auto own = catalog_entry(config, {"b", "postgresql://outboxd@pooler:6432/b", std::nullopt, std::nullopt});
  REQUIRE(same.ok());
  REQUIRE(own.ok());
  CHECK(same.value().database.listen_url == config.database.listen_url);
  CHECK(own.value().database.listen_url.empty());
  CHECK(own.value().database.listen_target.options.empty());
}

TEST_CASE("a catalog row is checked as an item of outboxes: is, its url never quoted", "[config][catalog]") {
  CHECK(problem({std::nullopt, std::nullopt, std::nullopt, std::nullopt}) == "name is NULL");
  CHECK(problem({"bad name", std::nullopt, std::nullopt, std::nullopt}) ==
        "name must be 1 to 63 characters of A-Z, a-z, 0-9, _, . and -, got \"bad name\"");
  CHECK(problem({std::string(64, 'n'), std::nullopt, std::nullopt, std::nullopt}).starts_with("name must be"));
  CHECK(problem({"a", "mysql://u:hunter2@db/a", std::nullopt, std::nullopt}) ==
        "\"a\": url a libpq URI must start with postgresql:// or postgres://");
  CHECK(problem({"a", "postgresql://u:hunter2@db/a", std::nullopt, std::nullopt}) ==
        "\"a\": url: the url already contains a password; give it in one place only");
  CHECK(problem({"a", std::nullopt, "Acme", std::nullopt}) ==
        "\"a\": schema must be a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 52 bytes), got \"Acme\"");
  CHECK(problem({"a", std::nullopt, "pg_acme", std::nullopt}) ==
        "\"a\": schema must not start with \"pg_\" (reserved by PostgreSQL)");
  CHECK(problem({"a", std::nullopt, "workflow", std::nullopt}) ==
        "\"a\": schema and workflow_schema must differ (both are \"workflow\")");
  Config no_url = defaults();
  no_url.database = {};
  auto missing = catalog_entry(no_url, {"a", std::nullopt, std::nullopt, std::nullopt});
  CHECK(missing.error().message == "\"a\": url is NULL, and database.url gives no default");
}
