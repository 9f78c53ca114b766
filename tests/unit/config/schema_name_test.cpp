// The schema-name rule the config, migrate and the CLI share.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "config/loader.hpp"
#include "config/schema_name.hpp"

using namespace outboxd::config;

TEST_CASE("schema names: lower-case identifiers, 52 bytes for the outbox, 63 for workflows", "[config]") {
  CHECK(max_schema_name_bytes(SchemaKind::outbox) == 52);
  CHECK(max_schema_name_bytes(SchemaKind::workflow) == 63);
  for (const auto kind : {SchemaKind::outbox, SchemaKind::workflow}) {
    for (const std::string& good : std::vector<std::string>{"outbox", "_x", "a1_b2", "order", std::string(52, 'a')}) {
      INFO(good);
      CHECK_FALSE(schema_name_problem(good, kind).has_value());
    }
    for (const std::string& bad : std::vector<std::string>{"", "Outbox", "1abc", "a-b", "a b", "a\"b", "a\nb", "bücher", "pg_x",
                                  std::string("a\0b", 3), std::string(64, 'a')}) {
      INFO(bad);
      CHECK(schema_name_problem(bad, kind).has_value());
    }
  }
  CHECK(schema_name_problem(std::string(53, 'a'), SchemaKind::outbox) ==
        "must be a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 52 bytes), got \"" + std::string(53, 'a') +
            "\"");
  CHECK_FALSE(schema_name_problem(std::string(63, 'a'), SchemaKind::workflow).has_value());
  CHECK(schema_name_problem("pg_x", SchemaKind::workflow) == "must not start with \"pg_\" (reserved by PostgreSQL)");
}

TEST_CASE("the config reports a schema name with the rule's own words", "[config]") {
  const auto loaded = load_string("database:\n  url: postgresql://outboxd@127.0.0.1:5432/app\n"
                                  "broker:\n  url: amqp://127.0.0.1:5672\n"
                                  "outbox:\n  schema: " + std::string(53, 'a') + "\n  workflow_schema: " +
                                      std::string(64, 'w') + "\n",
                                  "outboxd.yaml");
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error_text() ==
        "outboxd.yaml:6:11: outbox.schema: " + *schema_name_problem(std::string(53, 'a'), SchemaKind::outbox) +
            "\noutboxd.yaml:7:20: outbox.workflow_schema: " +
            *schema_name_problem(std::string(64, 'w'), SchemaKind::workflow));
}
