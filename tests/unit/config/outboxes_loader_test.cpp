// Loading many outboxes: each item's sections over the top-level ones, their errors where they are, tenants:.
#include <catch2/catch.hpp>

#include "config/loader.hpp"
#include "config/url.hpp"

using namespace outboxd::config;

namespace {

using Strings = std::vector<std::string>;

const std::string kBroker = "broker:\n  url: amqp://127.0.0.1:5672\n";

Strings messages_of(const std::string& yaml) {
  const auto result = load_string(yaml, "many.yaml");
  Strings out;
  for (const auto& diagnostic : result.diagnostics()) out.push_back(diagnostic.to_string_without_file());
  return out;
}

Config loaded(const std::string& yaml) {
  auto result = load_string(yaml, "many.yaml");
  INFO(result.error_text());
  REQUIRE(result.ok());
  return std::move(result).value();
}

}  // namespace

TEST_CASE("each outbox takes database: and outbox: as defaults, its own keys over them", "[config][outboxes]") {
  const Config config = loaded(kBroker +
                               "database:\n"
                               "  url: postgresql://outboxd@db/app\n"
                               "  password: shared\n"
                               "  statement_timeout_ms: 5000\n"
                               "outbox:\n"
                               "  partitions: 8\n"
                               "outboxes:\n"
                               "  - name: acme\n"
                               "  - name: globex\n"
                               "    database:\n"
                               "      url: postgresql://outboxd@db/globex\n"
                               "      connect_timeout_ms: 1000\n"
                               "    outbox:\n"
                               "      schema: globex\n");
  REQUIRE(config.outboxes.size() == 2);
  CHECK(config.many_outboxes());
  const OutboxEntry& acme = config.outboxes[0];
  CHECK(acme.name == "acme");
  CHECK(acme.database == config.database);
  CHECK(acme.outbox == config.outbox);

  const OutboxEntry& globex = config.outboxes[1];
  DatabaseConfig expected = config.database;
  REQUIRE(set_database_url(expected, "postgresql://outboxd@db/globex"));
  expected.connect_timeout = milliseconds(1000);
  CHECK(globex.database == expected);
  CHECK(globex.database.password == "shared");
  CHECK(globex.database.statement_timeout == milliseconds(5000));
  CHECK(globex.outbox.schema == "globex");
  CHECK(globex.outbox.partitions == 8);
}

TEST_CASE("with many outboxes database.url is only a default, and each outbox ends with a url", "[config][outboxes]") {
  const Config config = loaded(kBroker +
                               "outboxes:\n"
                               "  - name: a\n"
                               "    database: {url: \"host=db1 dbname=a\"}\n");
  CHECK(config.database.url.empty());
  CHECK(config.outboxes[0].database.target.get("dbname") == "a");

  CHECK(messages_of(kBroker + "outboxes:\n  - name: a\n  - name: b\n    database:\n      pooler: session\n") ==
        Strings{"4:5: outboxes[0].database: missing required key \"url\" (give it here, or database.url for every "
                "outbox)",
                "6:5: outboxes[1].database: missing required key \"url\" (give it here, or database.url for every "
                "outbox)"});
  // Without outboxes: or a catalog, database.url is required as ever.
  CHECK(messages_of(kBroker + "database:\n  pooler: none\n") == Strings{"3:1: database: missing required key \"url\""});
}

TEST_CASE("an item's mistakes are reported at their place, with the item's path, all at once", "[config][outboxes]") {
  CHECK(messages_of(kBroker +
                    "outboxes:\n"
                    "  - name: acme\n"
                    "    database:\n"
                    "      url: postgresql://outboxd@db/acme\n"
                    "      conect_timeout_ms: 1000\n"
                    "      reconnect_max_ms: 0\n"
                    "    outbox:\n"
                    "      schema: Acme\n"
                    "    shcema: x\n"
                    "  - name: \"a b\"\n"
                    "    database: {url: \"postgresql://x@db/b\"}\n") ==
        Strings{
            "7:7: outboxes[0].database.conect_timeout_ms: unknown key \"conect_timeout_ms\" (did you mean "
            "\"connect_timeout_ms\"?)",
            "8:25: outboxes[0].database.reconnect_max_ms: must be between 1 and 3600000, got 0",
            "10:15: outboxes[0].outbox.schema: must be a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 52 "
            "bytes), got \"Acme\"",
            "11:5: outboxes[0].shcema: unknown key \"shcema\"",
            "12:11: outboxes[1].name: must be 1 to 63 characters of A-Z, a-z, 0-9, _, . and -, got \"a b\""});
}

TEST_CASE("names are unique, and two outboxes of one database keep their schemas apart", "[config][outboxes]") {
  const std::string head = kBroker +
                           "database:\n  url: postgresql://outboxd@db:5432/app\n"
                           "outboxes:\n"
                           "  - name: a\n";
  CHECK(messages_of(head + "  - name: a\n    outbox: {schema: b, workflow_schema: b_workflow}\n") ==
        Strings{"7:11: outboxes[1].name: the name \"a\" is taken by outboxes[0] (\"a\")"});
  // The same database written otherwise (conninfo, another user) is the same database.
  CHECK(messages_of(head + "  - name: b\n    database: {url: \"host=db dbname=app user=other\"}\n") ==
        Strings{"8:21: outboxes[1].database.url: names the same database and schema as outboxes[0] (\"a\"): "
                "db:5432/app, schema outbox"});
  CHECK(messages_of(head + "  - name: b\n    outbox: {schema: b}\n") ==
        Strings{"8:5: outboxes[1].outbox: its workflow_schema workflow is the workflow schema of "
                "outboxes[0] (\"a\") in the same database (db:5432/app); give each outbox of one database "
                "schemas of its own"});
  CHECK(messages_of(head + "  - name: b\n    outbox: {schema: workflow, workflow_schema: b_workflow}\n") ==
        Strings{"8:22: outboxes[1].outbox.schema: its schema workflow is the workflow schema of outboxes[0] (\"a\") "
                "in the same database (db:5432/app); give each outbox of one database schemas of its own"});
  // Another database may use the same schemas.
  CHECK(messages_of(head + "  - name: b\n    database: {url: \"postgresql://outboxd@db:5432/other\"}\n").empty());
}

TEST_CASE("an outbox with a url of its own does not inherit database.listen_url", "[config][outboxes]") {
  const Config config = loaded(kBroker +
                               "database:\n"
                               "  url: postgresql://outboxd@pooler:6432/app\n"
                               "  pooler: transaction\n"
                               "  listen_url: postgresql://outboxd@db:5432/app\n"
                               "outboxes:\n"
                               "  - name: same\n"
                               "    outbox: {schema: same, workflow_schema: same_workflow}\n"
                               "  - name: other\n"
                               "    database: {url: \"postgresql://outboxd@pooler:6432/other\"}\n"
                               "  - name: own\n"
                               "    database:\n"
                               "      url: postgresql://outboxd@pooler:6432/own\n"
                               "      listen_url: postgresql://outboxd@db:5432/own\n"
                               "  - name: direct\n"
                               "    database: {pooler: none}\n"
                               "    outbox: {schema: direct, workflow_schema: direct_workflow}\n");
  CHECK(config.outboxes[0].database.listen_url == config.database.listen_url);
  CHECK(config.outboxes[1].database.listen_url.empty());
  CHECK(config.outboxes[1].database.listen_target.options.empty());
  CHECK(config.outboxes[2].database.listen_target.get("dbname") == "own");
  CHECK(config.outboxes[3].database.listen_url.empty());  // no transaction pooler: the main connection LISTENs
}

TEST_CASE("an outbox's own password replaces database:'s password_file, and a password twice is refused",
          "[config][outboxes]") {
  const std::string file = std::string(OUTBOXD_SOURCE_DIR) + "/tests/config_corpus/valid/secrets/db_password";
  const Config config = loaded(kBroker + "database:\n  url: postgresql://outboxd@db/app\n  password_file: " + file +
                               "\noutboxes:\n  - name: a\n    database: {url: \"postgresql://x@db/a\", password: own}\n");
  CHECK(config.outboxes[0].database.password == "own");
  CHECK(config.outboxes[0].database.password_file.empty());  // else each connect would read the file again

  CHECK(messages_of(kBroker + "database:\n  password: shared\noutboxes:\n  - name: a\n"
                              "    database: {url: \"postgresql://x:pw@db/a\"}\n") ==
        Strings{"7:21: outboxes[0].database.url: the url already contains a password; give it in one place only"});
}

TEST_CASE("a rule broken by database: alone is reported there once, not again for each outbox", "[config][outboxes]") {
  CHECK(messages_of(kBroker +
                    "database:\n  url: postgresql://outboxd@db/app\n  reconnect_min_ms: 500\n  reconnect_max_ms: 100\n"
                    "outboxes:\n  - name: a\n  - name: b\n    database: {url: \"postgresql://outboxd@db/b\"}\n") ==
        Strings{"6:21: database.reconnect_max_ms: reconnect_max_ms (100) must be at least reconnect_min_ms (500)"});
}

TEST_CASE("outboxes: takes a list of mappings with at least one item", "[config][outboxes]") {
  CHECK(messages_of(kBroker + "database:\n  url: postgresql://outboxd@db/app\noutboxes: []\n") ==
        Strings{"5:11: outboxes: must list at least one outbox, or be left out (the one outbox of database:)"});
  CHECK(messages_of(kBroker + "database:\n  url: postgresql://outboxd@db/app\noutboxes: {name: a}\n") ==
        Strings{"5:11: outboxes: expected a list, got a mapping"});
  CHECK(messages_of(kBroker + "database:\n  url: postgresql://outboxd@db/app\noutboxes:\n  - acme\n") ==
        Strings{"6:5: outboxes[0]: expected a mapping, got \"acme\""});
}

TEST_CASE("tenants: applies to many outboxes only, and its catalog needs a query", "[config][outboxes]") {
  const std::string one = kBroker + "database:\n  url: postgresql://outboxd@db/app\n";
  CHECK(messages_of(one + "tenants:\n  max_connections: 4\n  catalog:\n    refresh_interval_ms: 5000\n") ==
        Strings{"6:20: tenants.max_connections: applies only to many outboxes: add outboxes: or "
                "tenants.catalog.query, or remove it",
                "8:26: tenants.catalog.refresh_interval_ms: is for the catalog, which needs a query: set "
                "tenants.catalog.query"});
  CHECK(messages_of(one + "tenants:\n  max_connections: 1\n  release_after_ms: 99\n") ==
        Strings{"6:20: tenants.max_connections: must be between 2 and 10000, got 1",
                "7:21: tenants.release_after_ms: must be between 100 and 86400000, got 99"});
  // An empty section is no key given.
  CHECK(messages_of(one + "tenants:\n  catalog:\n").empty());
}

TEST_CASE("the catalog's database is database: with its own keys over it", "[config][outboxes]") {
  const std::string head = kBroker + "database:\n  url: postgresql://outboxd@db/app\n  connect_timeout_ms: 2000\n";
  Config config = loaded(head + "tenants:\n  catalog:\n    query: SELECT 'a' AS name\n");
  CHECK(config.many_outboxes());
  CHECK(config.tenants.catalog.database == config.database);

  config = loaded(head +
                  "tenants:\n  catalog:\n    query: SELECT name FROM t\n"
                  "    database:\n      url: postgresql://reader@db/catalog\n");
  CHECK(config.tenants.catalog.database.target.get("dbname") == "catalog");
  CHECK(config.tenants.catalog.database.connect_timeout == milliseconds(2000));

  CHECK(messages_of(kBroker + "outboxes:\n  - {name: a, database: {url: \"host=db\"}}\n"
                              "tenants:\n  catalog:\n    query: SELECT name FROM t\n"
                              "    database:\n      ulr: x\n") ==
        Strings{"9:7: tenants.catalog.database.ulr: unknown key \"ulr\" (did you mean \"url\"?)"});
  CHECK(messages_of(kBroker + "outboxes:\n  - {name: a, database: {url: \"host=db\"}}\n"
                              "tenants:\n  catalog:\n    query: SELECT name FROM t\n") ==
        Strings{"7:12: tenants.catalog.query: the catalog needs a database url: give tenants.catalog.database.url "
                "or database.url"});
}
