// ${VAR}, ${VAR:-default} and $$ in config values, with an injected environment.
#include <catch2/catch.hpp>

#include <map>

#include "config/env_substitution.hpp"
#include "config/loader.hpp"

using namespace outboxd::config;

namespace {

EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto found = vars.find(name);
    if (found == vars.end()) return std::nullopt;
    return found->second;
  };
}

std::string expand(std::string_view text, const EnvLookup& env) {
  auto result = substitute_env(text, env);
  REQUIRE(result.ok());
  return result.value();
}

const char* kBase =
    "database:\n"
    "  url: postgresql://outboxd@127.0.0.1:5432/app\n"
    "broker:\n"
    "  url: amqp://127.0.0.1:5672\n";

}  // namespace

TEST_CASE("variables are replaced, defaults apply when unset or empty", "[config][env]") {
  const auto env = fake_env({{"HOST", "db.internal"}, {"PORT", "6432"}, {"EMPTY", ""}});
  CHECK(expand("postgresql://${HOST}:${PORT}/app", env) == "postgresql://db.internal:6432/app");
  CHECK(expand("${MISSING:-fallback}", env) == "fallback");
  CHECK(expand("${EMPTY:-fallback}", env) == "fallback");
  CHECK(expand("${HOST:-fallback}", env) == "db.internal");
  CHECK(expand("${MISSING:-}", env).empty());
  CHECK(expand("${EMPTY}", env).empty());
  CHECK(expand("no references", env) == "no references");
}

TEST_CASE("$$ is a literal dollar and a lone $ stays as it is", "[config][env]") {
  const auto env = fake_env({{"X", "x"}});
  CHECK(expand("pa$$word", env) == "pa$word");
  CHECK(expand("$${X}", env) == "${X}");
  CHECK(expand("cost: 5$ or $5", env) == "cost: 5$ or $5");
  CHECK(expand("$", env) == "$");
  CHECK(expand("$$$${X}", env) == "$${X}");
}

TEST_CASE("a default is literal text up to the first closing brace", "[config][env]") {
  const auto env = fake_env({});
  CHECK(expand("${A:-x:-y}", env) == "x:-y");
  CHECK(expand("${A:-a b}", env) == "a b");
  CHECK(expand("${A:-{x}", env) == "{x");
}

TEST_CASE("unset variables without default, bad names and unclosed references are errors", "[config][env]") {
  const auto env = fake_env({});
  const auto unset = substitute_env("${DB_URL}", env);
  REQUIRE_FALSE(unset.ok());
  CHECK(unset.error().message ==
        "environment variable DB_URL is not set (write ${DB_URL:-default} to give a default)");

  CHECK_FALSE(substitute_env("${}", env).ok());
  CHECK_FALSE(substitute_env("${1ABC}", env).ok());
  CHECK_FALSE(substitute_env("${A-B}", env).ok());
  CHECK_FALSE(substitute_env("${A B}", env).ok());

  const auto unclosed = substitute_env("secret${PART", env);
  REQUIRE_FALSE(unclosed.ok());
  CHECK(unclosed.error().message.find("PART") == std::string::npos);
}

TEST_CASE("substitution happens before type conversion and errors carry the value's position", "[config][env]") {
  LoadOptions options;
  options.env = fake_env({{"BATCH", "250"}, {"WORDS", "many"}});
  auto good = load_string(std::string(kBase) + "dispatch:\n  batch_size: ${BATCH}\n  in_flight: \"${NONE:-42}\"\n",
                          "env.yaml", options);
  REQUIRE(good.ok());
  CHECK(good.value().dispatch.batch_size == 250);
  CHECK(good.value().dispatch.in_flight == 42);

  const auto bad = load_string(std::string(kBase) + "dispatch:\n  batch_size: ${WORDS}\n  in_flight: ${NONE}\n",
                               "env.yaml", options);
  REQUIRE(bad.diagnostics().size() == 2);
  CHECK(bad.diagnostics()[0].to_string() == "env.yaml:6:15: dispatch.batch_size: expected an integer, got \"many\"");
  CHECK(bad.diagnostics()[1].to_string() ==
        "env.yaml:7:14: dispatch.in_flight: environment variable NONE is not set (write ${NONE:-default} to give a "
        "default)");
}

TEST_CASE("substitution applies to list items and leaves keys and comments alone", "[config][env]") {
  LoadOptions options;
  options.env = fake_env({{"MECH", "PLAIN"}, {"USER", "guest"}, {"PASS", "guest"}});
  auto loaded = load_string(std::string(kBase) +
                                "  username: ${USER}\n"
                                "  password: ${PASS}\n"
                                "  sasl_mechanisms: [\"${MECH}\"]  # ${NOT_EXPANDED}\n",
                            "env.yaml", options);
  REQUIRE(loaded.ok());
  CHECK(loaded.value().broker.sasl_mechanisms == std::vector<std::string>{"PLAIN"});
}

TEST_CASE("a substituted boolean is read as strictly as a written one, at the scalar's position", "[config][env]") {
  LoadOptions options;
  options.env = fake_env({{"VERIFY", "false"}, {"INSECURE", "yes"}});
  auto good = load_string(std::string(kBase) + "  tls:\n    verify_host: ${VERIFY}\n", "env.yaml", options);
  INFO(good.error_text());
  REQUIRE(good.ok());
  CHECK_FALSE(good.value().broker.tls.verify_host);

  const auto bad = load_string(std::string(kBase) + "  allow_insecure_plain: ${INSECURE}\n  tls:\n    verify_host: ${NO}\n",
                               "env.yaml", options);
  REQUIRE(bad.diagnostics().size() == 2);
  CHECK(bad.diagnostics()[0].to_string() ==
        "env.yaml:5:25: broker.allow_insecure_plain: expected true or false, got \"yes\"");
  CHECK(bad.diagnostics()[1].to_string() ==
        "env.yaml:7:18: broker.tls.verify_host: environment variable NO is not set (write ${NO:-default} to give a "
        "default)");
}

TEST_CASE("a variable's value is never parsed as YAML, however it looks", "[config][env]") {
  LoadOptions options;
  options.env = fake_env({{"USER", "a: b, [c] # d"}, {"BATCH", "[1]"}});
  auto loaded = load_string(std::string(kBase) + "leases:\n  instance_id: \"${USER}\"\n", "env.yaml", options);
  INFO(loaded.error_text());
  REQUIRE(loaded.ok());
  CHECK(loaded.value().leases.instance_id == "a: b, [c] # d");

  const auto list = load_string(std::string(kBase) + "dispatch:\n  batch_size: ${BATCH}\n", "env.yaml", options);
  REQUIRE(list.diagnostics().size() == 1);
  CHECK(list.diagnostics()[0].to_string() == "env.yaml:6:15: dispatch.batch_size: expected an integer, got \"[1]\"");
}

TEST_CASE("every kind of value is substituted, and its errors point at the scalar that held the reference",
          "[config][env]") {
  LoadOptions options;
  options.env = fake_env({{"JITTER", "2"}, {"LEVEL", "loud"}, {"MODE", "json"}, {"SIZE", "1000000000000"}});
  const auto loaded = load_string(std::string(kBase) +
                                      "  sasl_mechanisms: [PLAIN, \"${MECH}\"]\n"
                                      "dispatch:\n"
                                      "  backoff_jitter: ${JITTER}\n"
                                      "  batch_size: ${SIZE}\n"
                                      "log:\n"
                                      "  level: ${LEVEL}\n"
                                      "  format: ${MODE}\n",
                                  "env.yaml", options);
  std::vector<std::string> got;
  for (const auto& diagnostic : loaded.diagnostics()) got.push_back(diagnostic.to_string_without_file());
  CHECK(got == std::vector<std::string>{
                   "5:28: broker.sasl_mechanisms[1]: environment variable MECH is not set (write ${MECH:-default} "
                   "to give a default)",
                   "7:19: dispatch.backoff_jitter: must be between 0 and 1, got 2",
                   "8:15: dispatch.batch_size: must be between 1 and 10000, got 1000000000000",
                   "10:10: log.level: must be one of: trace, debug, info, warn, error, critical, off (got \"loud\")"});
}
