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
