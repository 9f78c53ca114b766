// The one-line check-config summary: what the daemon will connect to, never a secret.
#include <catch2/catch.hpp>

#include "config/loader.hpp"

using namespace outboxd::config;

namespace {

Config loaded_from(const std::string& yaml) {
  auto loaded = load_string(yaml, "summary.yaml");
  INFO(loaded.error_text());
  REQUIRE(loaded.ok());
  return std::move(loaded).value();
}

std::string summary_of(const std::string& yaml) { return summary(loaded_from(yaml)); }

}  // namespace

TEST_CASE("the summary names database, broker, profile, SASL, schema and partitions", "[config][summary]") {
  CHECK(summary_of("database:\n  url: postgresql://outboxd@127.0.0.1:5432/app\n"
                   "broker:\n  url: amqp://127.0.0.1:5672\n  profile: rabbitmq\n"
                   "  username: guest\n  password: guest\n"
                   "outbox:\n  schema: outbox\n") ==
        "ok: database outboxd@127.0.0.1:5432/app, broker amqp://127.0.0.1:5672 (rabbitmq, PLAIN as guest), schema outbox, "
        "64 partitions");
}

TEST_CASE("the summary carries no password from anywhere", "[config][summary]") {
  const std::string line = summary_of(
      "database:\n  url: postgresql://outboxd:db-secret@db.internal/app?password=other-secret\n"
      "broker:\n  url: amqps://broker.internal\n  username: svc\n  password: broker-secret\n"
      "outbox:\n  partitions: 1\n");
  CHECK(line ==
        "ok: database outboxd@db.internal:5432/app, broker amqps://broker.internal:5671 (generic, PLAIN as svc), schema "
        "outbox, 1 partition");
  CHECK(line.find("secret") == std::string::npos);
}

TEST_CASE("conninfo, socket and IPv6 targets are described", "[config][summary]") {
  const std::string broker = "broker:\n  url: amqp://[::1]\n";
  CHECK(summary_of("database:\n  url: \"host=pg port=6432 dbname=app password=x\"\n" + broker) ==
        "ok: database pg:6432/app, broker amqp://[::1]:5672 (generic, ANONYMOUS), schema outbox, 64 partitions");
  CHECK(summary_of("database:\n  url: postgresql:///app\n" + broker).find("database [local]:5432/app,") !=
        std::string::npos);
  CHECK(summary_of("database:\n  url: \"host=/var/run/postgresql dbname=app\"\n" + broker)
            .find("database /var/run/postgresql:5432/app,") != std::string::npos);
}

TEST_CASE("the summary of many outboxes counts them and lists each, without a password", "[config][outboxes]") {
  const Config config = loaded_from(
      "broker:\n  url: amqp://127.0.0.1:5672\n"
      "database:\n  url: postgresql://outboxd:secret@db/app\n"
      "outboxes:\n  - name: acme\n"
      "tenants:\n  max_connections: 4\n"
      "  catalog:\n    query: |\n      SELECT name\n      FROM tenants\n");
  CHECK(summary(config) == "ok: 1 outbox listed and more from a catalog, broker amqp://127.0.0.1:5672 (generic, "
                           "ANONYMOUS)");
  CHECK(outboxes_summary(config) ==
        std::vector<std::string>{
            "outbox acme: outboxd@db:5432/app, schema outbox, workflow_schema workflow, 64 partitions",
            "catalog: outboxd@db:5432/app, read every 60000 ms: SELECT name FROM tenants",  // one line
            "tenants: max_connections 4, idle_check_interval 5000 ms, release_after 10000 ms"});
  CHECK(outboxes_summary(Config{}).empty());
}
