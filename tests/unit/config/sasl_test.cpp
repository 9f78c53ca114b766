// SASL mechanism resolution: an explicit list in the struct, and no silent fallback.
#include <catch2/catch.hpp>

#include "config/loader.hpp"

using namespace outboxd::config;

namespace {

using Strings = std::vector<std::string>;

LoadResult load_broker(const std::string& broker_lines) {
  return load_string("database:\n  url: postgresql://outboxd@127.0.0.1:5432/app\n"
                     "broker:\n" + broker_lines,
                     "sasl.yaml");
}

Strings messages(const LoadResult& result) {
  Strings out;
  for (const auto& diagnostic : result.diagnostics()) out.push_back(diagnostic.to_string_without_file());
  return out;
}

}  // namespace

TEST_CASE("without a list: PLAIN with a username, ANONYMOUS without", "[config][sasl]") {
  auto plain = load_broker("  url: amqp://127.0.0.1:5672\n  username: guest\n  password: guest\n");
  REQUIRE(plain.ok());
  CHECK(plain.value().broker.sasl_mechanisms == Strings{"PLAIN"});

  auto anonymous = load_broker("  url: amqp://127.0.0.1:5672\n");
  REQUIRE(anonymous.ok());
  CHECK(anonymous.value().broker.sasl_mechanisms == Strings{"ANONYMOUS"});

  auto empty_list = load_broker("  url: amqp://127.0.0.1:5672\n  sasl_mechanisms: []\n");
  REQUIRE(empty_list.ok());
  CHECK(empty_list.value().broker.sasl_mechanisms == Strings{"ANONYMOUS"});
}

TEST_CASE("an explicit list is kept in order, upper-cased", "[config][sasl]") {
  auto loaded = load_broker(
      "  url: amqp://127.0.0.1:5672\n  username: guest\n  password: guest\n  sasl_mechanisms: [plain]\n");
  REQUIRE(loaded.ok());
  CHECK(loaded.value().broker.sasl_mechanisms == Strings{"PLAIN"});
}

TEST_CASE("EXTERNAL needs amqps with a client certificate and key", "[config][sasl]") {
  const std::string tls_dir = std::string(OUTBOXD_SOURCE_DIR) + "/tests/config_corpus/valid/tls/";
  auto loaded = load_broker("  url: amqps://broker.internal\n  sasl_mechanisms: [EXTERNAL]\n  tls:\n"
                            "    cert_file: " + tls_dir + "client.pem\n    key_file: " + tls_dir + "client.key\n");
  INFO(loaded.error_text());
  REQUIRE(loaded.ok());
  CHECK(loaded.value().broker.sasl_mechanisms == Strings{"EXTERNAL"});
  CHECK(loaded.value().broker.tls.enabled);

  CHECK(messages(load_broker("  url: amqps://broker.internal\n  sasl_mechanisms: [EXTERNAL]\n")) ==
        Strings{"5:20: broker.sasl_mechanisms: EXTERNAL needs TLS (an amqps:// url) with tls.cert_file and "
                "tls.key_file"});
}

TEST_CASE("PLAIN needs a username and a password", "[config][sasl]") {
  CHECK(messages(load_broker("  url: amqp://127.0.0.1:5672\n  sasl_mechanisms: [PLAIN]\n")) ==
        Strings{"5:20: broker.sasl_mechanisms: PLAIN needs broker.username"});
  CHECK(messages(load_broker("  url: amqp://127.0.0.1:5672\n  username: guest\n  sasl_mechanisms: [PLAIN]\n")) ==
        Strings{"6:20: broker.sasl_mechanisms: PLAIN needs broker.password or broker.password_file"});
  CHECK(messages(load_broker("  url: amqp://127.0.0.1:5672\n  username: guest\n")) ==
        Strings{"5:13: broker.username: PLAIN (chosen because a username is set) needs broker.password or "
                "broker.password_file"});
}

TEST_CASE("ANONYMOUS with a username and a password nobody uses are errors", "[config][sasl]") {
  CHECK(messages(load_broker("  url: amqp://127.0.0.1:5672\n  username: guest\n  password: guest\n"
                             "  sasl_mechanisms: [PLAIN, ANONYMOUS]\n")) ==
        Strings{"5:13: broker.username: ANONYMOUS takes no username: remove broker.username or put PLAIN in "
                "broker.sasl_mechanisms"});
  CHECK(messages(load_broker("  url: amqp://127.0.0.1:5672\n  password: guest\n")) ==
        Strings{"5:13: broker.password: needs broker.username (without a username the mechanism is ANONYMOUS)"});
}

TEST_CASE("unknown and repeated mechanisms are reported per item", "[config][sasl]") {
  CHECK(messages(load_broker("  url: amqp://127.0.0.1:5672\n  sasl_mechanisms: [ANONYMOUS, CRAM-MD5, anonymous]\n")) ==
        Strings{"5:32: broker.sasl_mechanisms[1]: must be one of: PLAIN, EXTERNAL, ANONYMOUS (got \"CRAM-MD5\")",
                "5:42: broker.sasl_mechanisms[2]: \"ANONYMOUS\" is listed twice"});
}
