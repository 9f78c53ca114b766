// Unit tests of the strict "host:port" / "[ipv6]:port" parser that http.listen and the HTTP server share.
#include <catch2/catch.hpp>

#include "config/listen_address.hpp"

using namespace outboxd;
using namespace outboxd::config;

TEST_CASE("Listen addresses with a host name or IPv4 address", "[config]") {
  auto local = parse_listen_address("127.0.0.1:9187");
  REQUIRE(local.ok());
  CHECK(local.value().host == "127.0.0.1");
  CHECK(local.value().port == 9187);

  auto any = parse_listen_address("0.0.0.0:0");
  REQUIRE(any.ok());
  CHECK(any.value().host == "0.0.0.0");
  CHECK(any.value().port == 0);

  auto named = parse_listen_address("localhost:65535");
  REQUIRE(named.ok());
  CHECK(named.value().host == "localhost");
  CHECK(named.value().port == 65535);
}

TEST_CASE("Listen addresses with a bracketed IPv6 address", "[config]") {
  auto loopback = parse_listen_address("[::1]:9187");
  REQUIRE(loopback.ok());
  CHECK(loopback.value().host == "::1");
  CHECK(loopback.value().port == 9187);

  auto any = parse_listen_address("[::]:0");
  REQUIRE(any.ok());
  CHECK(any.value().host == "::");

  auto mapped = parse_listen_address("[::ffff:127.0.0.1]:80");
  REQUIRE(mapped.ok());
  CHECK(mapped.value().host == "::ffff:127.0.0.1");
}

TEST_CASE("Malformed listen addresses are fatal errors that quote the input", "[config]") {
  const char* bad[] = {
      "",              "9187",          ":9187",          "127.0.0.1:",   "127.0.0.1:65536",
      "127.0.0.1:-1",  "127.0.0.1:+80", "127.0.0.1:80a",  "127.0.0.1: 80", "::1:9187",
      "[::1]9187",     "[::1]",         "[::1:9187",      "[]:9187",      "[127.0.0.1]:80",
      "local host:80", "host\n:80",     "127.0.0.1:123456", "ho[st:9187",   "[zz]:9187",
      "a:000080",
  };
  for (const char* text : bad) {
    INFO("input: \"" << text << "\"");
    auto parsed = parse_listen_address(text);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().kind == core::ErrorKind::fatal);
    CHECK(parsed.error().message.find(" (got \"") != std::string::npos);
  }
}

TEST_CASE("Listen address errors say what is wrong", "[config]") {
  CHECK(parse_listen_address("::1:9187").error().message ==
        "write an IPv6 address in brackets: [::1]:9187 (got \"::1:9187\")");
  CHECK(parse_listen_address("127.0.0.1:99999").error().message ==
        "the port must be 1 to 5 digits, at most 65535 (got \"127.0.0.1:99999\")");
  CHECK(parse_listen_address("a:000080").error().message ==
        "the port must be 1 to 5 digits, at most 65535 (got \"a:000080\")");
  CHECK(parse_listen_address(":80").error().message == "missing host (use 0.0.0.0 for every interface) (got \":80\")");
}
