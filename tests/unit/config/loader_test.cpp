// Loading: the documented example, defaults, value conversion and the shape of every kind of diagnostic.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "config/loader.hpp"
#include "config/url.hpp"

using namespace outboxd::config;

namespace {

using Strings = std::vector<std::string>;

const std::string kExample = std::string(OUTBOXD_SOURCE_DIR) + "/config/outboxd.yaml";
const std::string kMinimal =
    "database:\n"
    "  url: postgresql://outboxd@127.0.0.1:5432/app\n"
    "broker:\n"
    "  url: amqp://127.0.0.1:5672\n";

Strings messages(const LoadResult& result) {
  Strings out;
  for (const auto& diagnostic : result.diagnostics()) out.push_back(diagnostic.to_string_without_file());
  return out;
}

Strings messages_of(const std::string& yaml) { return messages(load_string(yaml, "test.yaml")); }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("the documented example loads cleanly and holds exactly the defaults", "[config][example]") {
  auto loaded = load_file(kExample);
  INFO(loaded.error_text());
  REQUIRE(loaded.ok());
  const Config& config = loaded.value();
  const Config defaults;

  CHECK(config.source == kExample);
  CHECK(config.database.url == "postgresql://outboxd@127.0.0.1:5432/app");
  CHECK(config.broker.url == "amqp://127.0.0.1:5672");

  DatabaseConfig database = defaults.database;
  REQUIRE(set_database_url(database, config.database.url));
  CHECK(config.database == database);

  BrokerConfig broker = defaults.broker;
  REQUIRE(set_broker_url(broker, config.broker.url));
  broker.sasl_mechanisms = {"ANONYMOUS"};  // resolved from "no username"
  CHECK(config.broker == broker);

  CHECK(config.outbox == defaults.outbox);
  CHECK(config.dispatch == defaults.dispatch);
  CHECK(config.retention == defaults.retention);
  CHECK(config.leases == defaults.leases);
  CHECK(config.log == defaults.log);
  CHECK(config.http == defaults.http);
}

TEST_CASE("the documented example mentions every key the loader knows", "[config][example]") {
  const std::string text = read_text(kExample);
  const auto keys = known_key_paths();
  REQUIRE(keys.size() > 50);
  for (const auto& path : keys) {
    const auto dot = path.rfind('.');
    const std::string leaf = dot == std::string::npos ? path : path.substr(dot + 1);
    INFO(path);
    const bool top_level = text.find("\n" + leaf + ":") != std::string::npos;
    CHECK((top_level || text.find(" " + leaf + ":") != std::string::npos));
  }
}

TEST_CASE("a minimal config gets every default", "[config][loader]") {
  auto loaded = load_string(kMinimal, "minimal.yaml");
  REQUIRE(loaded.ok());
  Config expected;
  expected.source = "minimal.yaml";
  REQUIRE(set_database_url(expected.database, "postgresql://outboxd@127.0.0.1:5432/app"));
  REQUIRE(set_broker_url(expected.broker, "amqp://127.0.0.1:5672"));
  expected.broker.sasl_mechanisms = {"ANONYMOUS"};
  CHECK(loaded.value() == expected);
}

TEST_CASE("values convert to their types and units", "[config][loader]") {
  auto loaded = load_string(
      "database:\n  url: host=db dbname=app\n"
      "broker:\n  url: amqps://broker.internal\n  profile: Azure-ServiceBus\n  allow_insecure_plain: true\n"
      "dispatch:\n  backoff_initial_ms: 250\n  backoff_multiplier: 1.5\n  backoff_jitter: 0\n"
      "retention:\n  mode: keep\n  keep_for_s: 3600\n"
      "log:\n  level: DEBUG\n  format: json\n"
      "http:\n  listen: \"[::]:9187\"\n",
      "types.yaml");
  INFO(loaded.error_text());
  REQUIRE(loaded.ok());
  const Config& config = loaded.value();
  CHECK(config.broker.tls.enabled);
  CHECK(config.broker.profile == BrokerProfile::azure_servicebus);
  CHECK(config.broker.allow_insecure_plain);
  CHECK(config.dispatch.backoff_initial == std::chrono::milliseconds(250));
  CHECK(config.dispatch.backoff_multiplier == 1.5);
  CHECK(config.dispatch.backoff_jitter == 0.0);
  CHECK(config.retention.mode == RetentionMode::keep);
  CHECK(config.retention.keep_for == std::chrono::hours(1));
  CHECK(config.log.level == "debug");
  CHECK(config.log.format == LogFormat::json);
  CHECK(config.http.listen == "[::]:9187");
}

TEST_CASE("an empty value or an empty section keeps the defaults", "[config][loader]") {
  auto loaded = load_string(kMinimal + "  username:\ndispatch:\nleases:\n  lease_ttl_ms: ~\n", "nulls.yaml");
  INFO(loaded.error_text());
  REQUIRE(loaded.ok());
  CHECK(loaded.value().broker.username.empty());
  CHECK(loaded.value().dispatch == DispatchConfig{});
  CHECK(loaded.value().leases == LeaseConfig{});
}

TEST_CASE("diagnostics format as file:line:col: key.path: message", "[config][diagnostic]") {
  const Diagnostic full{"a.yaml", 4, 3, "dispatch.bath_size", "unknown key"};
  CHECK(full.to_string() == "a.yaml:4:3: dispatch.bath_size: unknown key");
  CHECK(full.to_string_without_file() == "4:3: dispatch.bath_size: unknown key");
  const Diagnostic document{"a.yaml", 1, 1, "", "the file is empty"};
  CHECK(document.to_string() == "a.yaml:1:1: the file is empty");
  const Diagnostic whole_file{"a.yaml", 0, 0, "", "cannot read the file: Permission denied"};
  CHECK(whole_file.to_string() == "a.yaml: cannot read the file: Permission denied");
}

TEST_CASE("a file that cannot be read is one diagnostic without a position", "[config][loader]") {
  const auto loaded = load_file("/nonexistent/outboxd.yaml");
  REQUIRE(loaded.diagnostics().size() == 1);
  CHECK(loaded.error_text() == "/nonexistent/outboxd.yaml: cannot read the file: No such file or directory");
  CHECK(loaded.error().kind == outboxd::core::ErrorKind::fatal);
  CHECK(loaded.error().message == loaded.error_text());
}

TEST_CASE("unknown keys suggest the closest known key only when it is close", "[config][loader]") {
  CHECK(messages_of(kMinimal + "dispatch:\n  bacth_size: 1\n  zzz: 1\n  inflight: 2\n") ==
        Strings{"6:3: dispatch.bacth_size: unknown key \"bacth_size\" (did you mean \"batch_size\"?)",
                "7:3: dispatch.zzz: unknown key \"zzz\"",
                "8:3: dispatch.inflight: unknown key \"inflight\" (did you mean \"in_flight\"?)"});
  CHECK(messages_of(kMinimal + "databse:\n  url: x\nlogs:\n  level: info\n") ==
        Strings{"5:1: databse: unknown key \"databse\" (did you mean \"database\"?)",
                "7:1: logs: unknown key \"logs\" (did you mean \"log\"?)"});
  CHECK(messages_of(kMinimal + "  tls:\n    ca: x\n    verify: false\n    ciphers: x\n") ==
        Strings{"6:5: broker.tls.ca: unknown key \"ca\" (did you mean \"ca_file\"?)",
                "7:5: broker.tls.verify: unknown key \"verify\" (did you mean \"verify_host\"?)",
                "8:5: broker.tls.ciphers: unknown key \"ciphers\""});
}

TEST_CASE("a key known in exactly one other section is pointed to", "[config][loader]") {
  CHECK(messages_of(kMinimal + "dispatch:\n  lease_ttl_ms: 1\n  reconnect_min_ms: 5\n") ==
        Strings{"6:3: dispatch.lease_ttl_ms: unknown key \"lease_ttl_ms\" (did you mean \"leases.lease_ttl_ms\"?)",
                "7:3: dispatch.reconnect_min_ms: unknown key \"reconnect_min_ms\""});
}

TEST_CASE("wrong types name what was expected and what was found", "[config][loader]") {
  CHECK(messages_of(kMinimal +
                    "dispatch:\n"
                    "  batch_size: 1.5\n"
                    "  in_flight: 0x10\n"
                    "  backoff_jitter: {a: 1}\n"
                    "  max_attempts: \"\"\n"
                    "log:\n"
                    "  level: [info]\n") ==
        Strings{"6:15: dispatch.batch_size: expected an integer, got \"1.5\"",
                "7:14: dispatch.in_flight: expected an integer, got \"0x10\"",
                "8:19: dispatch.backoff_jitter: expected a number, got a mapping",
                "9:17: dispatch.max_attempts: expected an integer, got \"\"",
                "11:10: log.level: expected a string, got a list"});
}

TEST_CASE("booleans are exactly true or false, not YAML 1.1's yes, on, y or another letter case", "[config][loader]") {
  CHECK(messages_of(kMinimal + "  allow_insecure_plain: false\n  tls:\n    verify_host: true\n").empty());
  for (const char* word : {"yes", "no", "on", "off", "y", "n", "True", "FALSE", "tRuE", "1", "0", "\"\""}) {
    INFO(word);
    const std::string got = word[0] == '"' ? "\"\"" : "\"" + std::string(word) + "\"";
    CHECK(messages_of(kMinimal + "  tls:\n    verify_host: " + word + "\n") ==
          Strings{"6:18: broker.tls.verify_host: expected true or false, got " + got});
  }
  CHECK(messages_of(kMinimal + "  allow_insecure_plain: [true]\n") ==
        Strings{"5:25: broker.allow_insecure_plain: expected true or false, got a list"});
}

TEST_CASE("YAML syntax errors are one diagnostic at the parser's position", "[config][loader]") {
  CHECK(messages_of("database:\n  url: [unclosed\nbroker: {}\n") ==
        Strings{"3:7: invalid YAML: end of sequence flow not found"});
  CHECK(messages_of("database:\n\turl: x\n").size() == 1);
  CHECK(messages_of("") == Strings{"1:1: the file is empty"});
  CHECK(messages_of("# nothing\n\n") == Strings{"1:1: the file is empty"});
  CHECK(messages_of("just a string\n") ==
        Strings{"1:1: expected a mapping of sections (database:, broker:, ...) at the top level"});
}

TEST_CASE("diagnostics come in file order whatever rule found them", "[config][loader]") {
  const auto found = messages_of(
      "leases:\n"
      "  lease_ttl_ms: 2000\n"
      "dispatch:\n"
      "  typo_key: 1\n"
      "  backoff_max_ms: 10\n"
      "database:\n"
      "  url: postgresql://outboxd@127.0.0.1:5432/app\n"
      "broker:\n"
      "  url: amqp://127.0.0.1:5672\n"
      "  usename: guest\n");
  CHECK(found == Strings{"2:17: leases.lease_ttl_ms: renew_interval_ms (10000) + safety_margin_ms (5000) must be "
                         "less than lease_ttl_ms (2000), or a lease could lapse before it is renewed",
                         "4:3: dispatch.typo_key: unknown key \"typo_key\"",
                         "5:19: dispatch.backoff_max_ms: backoff_max_ms (10) must be at least backoff_initial_ms "
                         "(1000)",
                         "10:3: broker.usename: unknown key \"usename\" (did you mean \"username\"?)"});
}

TEST_CASE("a value that failed its own check does not also fail a cross-field rule", "[config][loader]") {
  CHECK(messages_of(kMinimal + "dispatch:\n  backoff_initial_ms: soon\n  backoff_max_ms: 10\n") ==
        Strings{"6:23: dispatch.backoff_initial_ms: expected an integer, got \"soon\""});
}

TEST_CASE("secret values are never repeated in messages", "[config][loader]") {
  const auto loaded = load_string(
      "database:\n  url: postgresql://app:hunter2@db/app\n  password: hunter3\n"
      "broker:\n  url: amqp://u:hunter4@broker\n  password: \"hunter5${\"\n",
      "secret.yaml");
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.diagnostics().size() == 3);
  CHECK(loaded.error_text().find("hunter") == std::string::npos);
}

TEST_CASE("wait_for_standby: none, any, or a standby's application_name", "[config][loader]") {
  using Mode = StandbyWait::Mode;
  const auto [value, mode, name] = GENERATE(table<std::string, Mode, std::string>({
      {"none", Mode::none, ""},
      {"any", Mode::any, ""},
      {"replica-1", Mode::named, "replica-1"},
      {"\"walreceiver\"", Mode::named, "walreceiver"},
      {std::string(63, 's'), Mode::named, std::string(63, 's')},
  }));
  auto loaded = load_string("database:\n  url: postgresql://outboxd@127.0.0.1:5432/app\n  wait_for_standby: " + value +
                           "\nbroker:\n  url: amqp://127.0.0.1:5672\n",
                       "standby.yaml");
  INFO(value << ": " << loaded.error_text());
  REQUIRE(loaded.ok());
  CHECK(loaded.value().database.wait_for_standby.mode == mode);
  CHECK(loaded.value().database.wait_for_standby.application_name == name);
}

TEST_CASE("wait_for_standby refuses a name no standby can report", "[config][loader]") {
  const auto value = GENERATE(std::string(64, 's'), std::string("\"caf\\u00e9\""), std::string("\"a\\tb\""),
                              std::string("\"\""));
  const auto found = messages_of("database:\n  url: postgresql://outboxd@127.0.0.1:5432/app\n  wait_for_standby: " +
                                 value + "\nbroker:\n  url: amqp://127.0.0.1:5672\n");
  INFO(value);
  REQUIRE(found.size() == 1);
  CHECK(found[0].find("database.wait_for_standby: ") != std::string::npos);
}
