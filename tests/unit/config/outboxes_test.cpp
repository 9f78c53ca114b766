// Many outboxes apart from the file: the name rule, one outbox's own Config, the list merged with the catalog.
#include <catch2/catch.hpp>

#include "config/outboxes.hpp"
#include "config/url.hpp"

using namespace outboxd::config;

namespace {

using Strings = std::vector<std::string>;

OutboxEntry entry_named(std::string name, std::string url, std::string schema) {
  OutboxEntry entry{std::move(name), {}, {}};
  REQUIRE(set_database_url(entry.database, std::move(url)));
  entry.outbox.schema = std::move(schema);
  entry.outbox.workflow_schema = entry.outbox.schema + "_workflow";
  return entry;
}

}  // namespace

TEST_CASE("the list comes first; a catalog entry that clashes is left out and said why", "[config][outboxes]") {
  const std::vector<OutboxEntry> listed{entry_named("acme", "postgresql://x@db/one", "acme")};
  const auto set = merge_outboxes(listed, {entry_named("acme", "postgresql://x@db/two", "acme"),
                                           entry_named("globex", "postgresql://x@db/one", "globex"),
                                           entry_named("initech", "postgresql://y@db:5432/one", "acme"),
                                           entry_named("globex", "postgresql://x@db/three", "globex"),
                                           entry_named("hooli", "postgresql://x@db/one", "globex_workflow")});
  Strings names;
  for (const auto& entry : set.entries) names.push_back(entry.name);
  CHECK(names == Strings{"acme", "globex"});
  CHECK(set.problems ==
        Strings{"catalog: \"acme\" is in outboxes: too; the list's entry is used",
                "catalog: \"initech\" left out: names the same database and schema as outboxes[0] (\"acme\"): "
                "db:5432/one, schema acme",
                "catalog: \"globex\" left out: the name \"globex\" is taken by catalog \"globex\"",
                "catalog: \"hooli\" left out: its schema globex_workflow is the workflow schema of catalog "
                "\"globex\" in the same database (db:5432/one); give each outbox of one database schemas of its own"});
}

TEST_CASE("for_outbox makes a one-outbox config of an entry", "[config][outboxes]") {
  Config config;
  config.tenants.catalog.query = "SELECT name FROM tenants";
  config.outboxes = {entry_named("acme", "postgresql://x@db/acme", "acme")};
  config.dispatch.batch_size = 7;
  const Config one = for_outbox(config, config.outboxes[0]);
  CHECK_FALSE(one.many_outboxes());
  CHECK(one.database == config.outboxes[0].database);
  CHECK(one.outbox == config.outboxes[0].outbox);
  CHECK(one.dispatch.batch_size == 7);
  CHECK(one.tenants == TenantsConfig{});
}

TEST_CASE("outbox names: 1 to 63 of A-Z a-z 0-9 _ . -", "[config][outboxes]") {
  for (const char* good : {"a", "Acme", "acme.eu-1", "tenant_42", "-.-"}) CHECK_FALSE(outbox_name_problem(good));
  CHECK_FALSE(outbox_name_problem(std::string(63, 'a')));
  for (const char* bad : {"", "a b", "a/b", "é", "a\n"}) CHECK(outbox_name_problem(bad));
  CHECK(outbox_name_problem(std::string(64, 'a')));
}

TEST_CASE("name_list names the first twenty and counts the rest", "[config][outboxes]") {
  std::vector<OutboxEntry> entries;
  for (int i = 0; i < 22; ++i) {
    OutboxEntry entry;
    entry.name = std::to_string(i);
    entry.name.insert(entry.name.begin(), 'o');  // not "o" + ...: GCC 12's -O3 -Wrestrict false positive
    entries.push_back(std::move(entry));
  }
  CHECK(name_list({entries.begin(), entries.begin() + 2}) == "o0, o1");
  CHECK(name_list(entries).ends_with("o18, o19 and 2 more"));
}

TEST_CASE("database_sections: database:, then each outbox's and the catalog's that differ from it", "[config][outboxes]") {
  Config config;
  REQUIRE(set_database_url(config.database, "postgresql://x@db/app"));
  config.outboxes = {{"same", config.database, {}}, entry_named("own", "postgresql://x@db/own", "own")};
  config.tenants.catalog.query = "SELECT name FROM tenants";
  config.tenants.catalog.database = config.database;
  Strings paths;
  for (const auto& section : database_sections(config)) paths.push_back(section.path);
  CHECK(paths == Strings{"database", "outboxes[1].database"});
  config.tenants.catalog.database.connect_timeout = milliseconds(1000);
  CHECK(database_sections(config).back().path == "tenants.catalog.database");
  CHECK(database_sections(config).back().database == &config.tenants.catalog.database);
}
