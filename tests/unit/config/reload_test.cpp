// plan_reload: which changed keys a SIGHUP applies, which wait for a restart, and that no key is forgotten.
#include <catch2/catch.hpp>

#include <algorithm>

#include "config/loader.hpp"
#include "config/reload.hpp"

using namespace outboxd::config;

namespace {

using Strings = std::vector<std::string>;

Config base() {
  Config config;
  config.database.url = "postgresql://outboxd@127.0.0.1:5432/app";
  config.broker.url = "amqp://127.0.0.1:5672";
  return config;
}

}  // namespace

TEST_CASE("an unchanged file changes nothing", "[config][reload]") {
  const auto plan = plan_reload(base(), base());
  CHECK(plan.applied.empty());
  CHECK(plan.needs_restart.empty());
  CHECK(plan.config == base());
}

TEST_CASE("run-time tunables are applied, in file order", "[config][reload]") {
  Config loaded = base();
  loaded.log.level = "debug";
  loaded.log.format = LogFormat::json;
  loaded.dispatch.batch_size = 50;
  loaded.dispatch.in_flight = 20;
  loaded.dispatch.max_attempts = 3;
  loaded.dispatch.backoff_initial = milliseconds(5);
  loaded.dispatch.poll_interval = milliseconds(500);
  loaded.dispatch.stats_interval = milliseconds(0);
  loaded.retention.mode = RetentionMode::keep;
  loaded.retention.failed_keep_for = milliseconds(7200000);
  loaded.retention.purge_interval = milliseconds(1000);
  loaded.http.backlog_interval = milliseconds(0);

  const auto plan = plan_reload(base(), loaded);
  CHECK(plan.applied == Strings{"dispatch.batch_size", "dispatch.in_flight", "dispatch.max_attempts",
                                "dispatch.backoff_initial_ms", "dispatch.poll_interval_ms",
                                "dispatch.stats_interval_ms", "retention.mode", "retention.failed_keep_for_s",
                                "retention.purge_interval_ms",
                                "log.level", "log.format", "http.backlog_interval_ms"});
  CHECK(plan.needs_restart.empty());
  CHECK(plan.config == loaded);
}

TEST_CASE("connections, identity and order-affecting keys need a restart and keep their running value",
          "[config][reload]") {
  Config loaded = base();
  loaded.database.url = "postgresql://outboxd@db2:5432/app";
  loaded.database.statement_timeout = milliseconds(1000);
  loaded.broker.url = "amqps://broker:5671";
  loaded.broker.urls = {"amqps://broker-2:5671"};  // a node added: the publisher's rotation is built at start
  loaded.broker.tls.verify_host = false;
  loaded.broker.cloudevents.destinations = {"orders"};  // the publisher's encoder takes it at start
  loaded.dispatch.per_session_in_flight = 4;
  loaded.leases.lease_ttl = milliseconds(60000);
  loaded.http.listen = "127.0.0.1:9187";
  loaded.dispatch.batch_size = 7;

  const auto plan = plan_reload(base(), loaded);
  CHECK(plan.needs_restart == Strings{"database.url", "database.statement_timeout_ms", "broker.url", "broker.urls",
                                      "broker.tls",
                                      "broker.cloudevents", "dispatch.per_session_in_flight", "leases.lease_ttl_ms",
                                      "http.listen"});
  CHECK(plan.applied == Strings{"dispatch.batch_size"});
  Config expected = base();
  expected.dispatch.batch_size = 7;
  CHECK(plan.config == expected);
}

TEST_CASE("new password_file contents apply, a new path or an inline password needs a restart",
          "[config][reload]") {
  Config running = base();
  running.broker.password_file = "/run/credentials/broker-password";
  running.broker.password = "old";
  running.database.password = "inline-old";

  Config rotated = running;
  rotated.broker.password = "new";
  auto plan = plan_reload(running, rotated);
  CHECK(plan.applied == Strings{"broker.password_file"});
  CHECK(plan.needs_restart.empty());
  CHECK(plan.config.broker.password == "new");

  Config moved = running;
  moved.broker.password_file = "/etc/outboxd/broker-password";
  moved.database.password = "inline-new";
  plan = plan_reload(running, moved);
  CHECK(plan.applied.empty());
  CHECK(plan.needs_restart == Strings{"database.password", "broker.password_file"});
  CHECK(plan.config.database.password == "inline-old");
}

TEST_CASE("every key of the file is compared by the reload", "[config][reload]") {
  const auto compared = reload_key_paths();
  const auto covered = [&](const std::string& path) {
    return std::any_of(compared.begin(), compared.end(), [&](const std::string& key) {
      return path == key || path.rfind(key + ".", 0) == 0 || key.rfind(path + ".", 0) == 0;
    });
  };
  for (const auto& path : known_key_paths()) {
    INFO(path);
    CHECK(covered(path));
  }
}

namespace {

Config many() {
  Config config = base();
  OutboxEntry acme{"acme", config.database, config.outbox};
  config.outboxes = {acme};
  return config;
}

}  // namespace

TEST_CASE("with many outboxes the list, the catalog and their defaults are applied", "[config][reload]") {
  Config loaded = many();
  loaded.outboxes.push_back({"globex", loaded.database, loaded.outbox});
  loaded.tenants.catalog.query = "SELECT name FROM tenants";
  loaded.tenants.catalog.refresh_interval = milliseconds(5000);
  loaded.database.url = "postgresql://outboxd@db2:5432/app";
  loaded.database.password = "inline";
  loaded.outbox.partitions = 8;

  const auto plan = plan_reload(many(), loaded);
  CHECK(plan.applied == Strings{"database.url", "database.password", "outbox.partitions", "outboxes",
                                "tenants.catalog"});
  CHECK(plan.needs_restart.empty());
  CHECK(plan.config == loaded);
}

TEST_CASE("the connection budget, and moving between one outbox and many, need a restart", "[config][reload]") {
  Config budget = many();
  budget.tenants.max_connections = 64;
  budget.tenants.release_after = milliseconds(1000);
  auto plan = plan_reload(many(), budget);
  CHECK(plan.needs_restart == Strings{"tenants.max_connections", "tenants.release_after_ms"});
  CHECK(plan.config == many());

  plan = plan_reload(base(), many());
  CHECK(plan.needs_restart == Strings{"outboxes"});
  CHECK(plan.applied.empty());
  plan = plan_reload(many(), base());
  CHECK(plan.needs_restart == Strings{"outboxes"});

  Config catalog = base();
  catalog.tenants.catalog.query = "SELECT name FROM tenants";
  plan = plan_reload(base(), catalog);
  CHECK(plan.needs_restart == Strings{"tenants.catalog"});
  CHECK(plan.config == base());
}
