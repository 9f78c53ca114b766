// Connection settings from the config's parsed URL and SASL decision, and TLS files checked before connecting.
#include <catch2/catch.hpp>

#include "amqp/connection_settings.hpp"
#include "amqp/detail/proton_access.hpp"
#include "config/url.hpp"

using outboxd::amqp::connection_settings;
using outboxd::amqp::ConnectionSettings;
using outboxd::config::BrokerConfig;
using outboxd::core::ErrorKind;

namespace {

BrokerConfig broker(std::string url, std::string user = {}) {
  BrokerConfig config;
  REQUIRE(outboxd::config::set_broker_url(config, std::move(url)));
  config.username = std::move(user);
  return config;
}

ConnectionSettings ok(const BrokerConfig& config) {
  auto settings = connection_settings(config);
  INFO((settings.ok() ? std::string() : settings.error().message));
  REQUIRE(settings.ok());
  return settings.value();
}

std::string error(const BrokerConfig& config) {
  auto settings = connection_settings(config);
  REQUIRE_FALSE(settings.ok());
  CHECK(settings.error().kind == ErrorKind::fatal);
  return settings.error().message;
}

}  // namespace

TEST_CASE("URL parts come from the config's parsed endpoint", "[amqp]") {
  auto plain = ok(broker("amqp://broker.example:5673"));
  REQUIRE(plain.nodes.size() == 1);
  CHECK(plain.nodes[0].host == "broker.example");
  CHECK(plain.nodes[0].port == "5673");
  CHECK(plain.nodes[0].url == "amqp://broker.example:5673");
  CHECK(plain.nodes[0].name == "broker.example:5673");
  CHECK_FALSE(plain.tls);
  auto defaults = ok(broker("amqps://broker.example"));
  CHECK(defaults.tls);
  CHECK(defaults.nodes[0].port == "5671");
  CHECK(defaults.nodes[0].url == "amqps://broker.example:5671");
  CHECK(ok(broker("amqp://broker.example")).nodes[0].port == "5672");
  auto v6 = ok(broker("amqp://[::1]:5672/"));
  CHECK(v6.nodes[0].host == "::1");
  CHECK(v6.nodes[0].name == "[::1]:5672");
  CHECK(v6.loopback);

  BrokerConfig unparsed;
  unparsed.url = "amqp://h";  // set by hand, not through the config
  CHECK(error(unparsed).starts_with("broker.url was not parsed"));
}

TEST_CASE("Every node of broker.urls is a node, in order; loopback only when all of them are", "[amqp]") {
  BrokerConfig config = broker("amqp://127.0.0.1:5672", "app");
  config.urls = {"amqp://127.0.0.1:5672", "amqp://[::1]:5673", "amqp://broker.example"};
  config.url.clear();
  for (const auto& url : config.urls) config.endpoints.push_back(outboxd::config::parse_amqp_url(url).value());
  config.endpoints.erase(config.endpoints.begin());  // the one set_broker_url put there
  auto settings = ok(config);
  std::vector<std::string> names;
  for (const auto& node : settings.nodes) names.push_back(node.name);
  CHECK(names == std::vector<std::string>{"127.0.0.1:5672", "[::1]:5673", "broker.example:5672"});
  CHECK_FALSE(settings.loopback);
  CHECK(settings.plain_over_cleartext);  // broker.example is not loopback
  config.endpoints.pop_back();
  CHECK(ok(config).loopback);
  CHECK_FALSE(ok(config).plain_over_cleartext);
}

TEST_CASE("SASL: the config's decision, PLAIN with a username, ANONYMOUS without", "[amqp]") {
  CHECK(ok(broker("amqp://h", "app")).sasl_mechanisms == "PLAIN");
  CHECK(ok(broker("amqp://h", "app")).plain_allowed);
  CHECK(ok(broker("amqp://h")).sasl_mechanisms == "ANONYMOUS");
  CHECK_FALSE(ok(broker("amqp://h")).plain_allowed);

  auto config = broker("amqp://h", "app");
  config.sasl_mechanisms = {"PLAIN", "ANONYMOUS"};
  CHECK(ok(config).sasl_mechanisms == "PLAIN ANONYMOUS");

  auto external = broker("amqps://h");
  external.sasl_mechanisms = {"EXTERNAL"};
  external.tls.cert_file = OUTBOXD_SOURCE_DIR "/lib/amqp/publisher.hpp";  // readable stand-ins
  external.tls.key_file = OUTBOXD_SOURCE_DIR "/lib/amqp/publisher.cpp";
  CHECK(ok(external).sasl_mechanisms == "EXTERNAL");
}

TEST_CASE("TLS files must be readable before Proton sees them", "[amqp]") {
  auto config = broker("amqps://h");
  config.tls.ca_file = "/nonexistent/ca.pem";
  CHECK(error(config) == "broker.tls.ca_file: cannot read \"/nonexistent/ca.pem\": No such file or directory");
  config.tls.ca_file.clear();
  config.tls.cert_file = OUTBOXD_SOURCE_DIR "/lib/amqp/publisher.hpp";
  CHECK(error(config) == "broker.tls: cert_file and key_file go together");
  REQUIRE(outboxd::config::set_broker_url(config, "amqp://h"));  // no TLS: the files are not used, so not checked
  CHECK(ok(config).sasl_mechanisms == "ANONYMOUS");
}

TEST_CASE("PLAIN over cleartext to a non-loopback host is flagged for a warning", "[amqp]") {
  CHECK(ok(broker("amqp://broker.example", "app")).plain_over_cleartext);
  CHECK_FALSE(ok(broker("amqp://127.0.0.1", "app")).plain_over_cleartext);
  CHECK_FALSE(ok(broker("amqp://localhost", "app")).plain_over_cleartext);
  // A name is not an address: 127.evil.example resolves wherever its owner likes.
  CHECK(ok(broker("amqp://127.evil.example", "app")).plain_over_cleartext);
  CHECK_FALSE(ok(broker("amqps://broker.example", "app")).plain_over_cleartext);
  CHECK_FALSE(ok(broker("amqp://broker.example")).plain_over_cleartext);  // ANONYMOUS
  auto silenced = broker("amqp://broker.example", "app");
  silenced.allow_insecure_plain = true;
  CHECK_FALSE(ok(silenced).plain_over_cleartext);
  auto tls_flag = broker("amqp://broker.example", "app");
  tls_flag.tls.enabled = true;
  CHECK(ok(tls_flag).tls);
  CHECK_FALSE(ok(tls_flag).plain_over_cleartext);
}

TEST_CASE("delivery tags are 8 big-endian bytes and read back", "[amqp]") {
  using outboxd::amqp::make_tag;
  using outboxd::amqp::tag_value;
  const auto tag = make_tag(0x0102030405060708ULL);
  CHECK(tag == proton::binary{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(tag_value(tag) == 0x0102030405060708ULL);
  CHECK(tag_value(make_tag(0)) == 0ULL);
  CHECK(tag_value(make_tag(UINT64_MAX)) == UINT64_MAX);
  CHECK_FALSE(tag_value(proton::binary{1, 2, 3}).has_value());
}
