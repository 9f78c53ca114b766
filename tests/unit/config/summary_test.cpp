// The one-line check-config summary: what the daemon will connect to, never a secret.
#include <catch2/catch.hpp>

#include "config/loader.hpp"

using namespace outboxd::config;

namespace {

std::string summary_of(const std::string& yaml) {
  auto loaded = load_string(yaml, "summary.yaml");
  INFO(loaded.error_text());
  REQUIRE(loaded.ok());
  return summary(loaded.value());
}

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
