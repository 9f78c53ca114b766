// Parsing of AMQP URLs and libpq connection strings, and the edit distance behind key suggestions.
#include <catch2/catch.hpp>

#include "config/suggest.hpp"
#include "config/url.hpp"

using namespace outboxd::config;

TEST_CASE("AMQP URLs: scheme, host and port with the scheme's default", "[config][url]") {
  auto plain = parse_amqp_url("amqp://127.0.0.1:5672");
  REQUIRE(plain.ok());
  CHECK_FALSE(plain.value().tls);
  CHECK(plain.value().host == "127.0.0.1");
  CHECK(plain.value().port == 5672);

  auto tls = parse_amqp_url("amqps://broker.internal");
  REQUIRE(tls.ok());
  CHECK(tls.value().tls);
  CHECK(tls.value().port == 5671);

  auto ipv6 = parse_amqp_url("amqp://[::1]:15672/");
  REQUIRE(ipv6.ok());
  CHECK(ipv6.value().host == "::1");
  CHECK(ipv6.value().port == 15672);
}

TEST_CASE("AMQP URLs that are refused", "[config][url]") {
  CHECK_FALSE(parse_amqp_url("127.0.0.1:5672").ok());
  CHECK_FALSE(parse_amqp_url("http://host").ok());
  CHECK_FALSE(parse_amqp_url("amqp://").ok());
  CHECK_FALSE(parse_amqp_url("amqp://host:").ok());
  CHECK_FALSE(parse_amqp_url("amqp://host:0").ok());
  CHECK_FALSE(parse_amqp_url("amqp://host:abc").ok());
  CHECK_FALSE(parse_amqp_url("amqp://::1:5672").ok());
  CHECK_FALSE(parse_amqp_url("amqp://host/vhost").ok());
  CHECK_FALSE(parse_amqp_url("amqp://host?x=1").ok());
  const auto credentials = parse_amqp_url("amqp://user:pw@host");
  REQUIRE_FALSE(credentials.ok());
  CHECK(credentials.error().message.find("pw") == std::string::npos);
}

TEST_CASE("libpq URIs and conninfo strings give host, port and database", "[config][url]") {
  auto uri = parse_pg_url("postgresql://app:pw@db.internal:6432/orders?sslmode=require");
  REQUIRE(uri.ok());
  CHECK(uri.value().host == "db.internal");
  CHECK(uri.value().port == "6432");
  CHECK(uri.value().dbname == "orders");
  CHECK(uri.value().user == "app");
  CHECK(uri.value().has_password);

  auto query = parse_pg_url("postgres:///app?host=%2Fvar%2Frun%2Fpostgresql&port=5433");
  REQUIRE(query.ok());
  CHECK(query.value().host == "/var/run/postgresql");
  CHECK(query.value().port == "5433");
  CHECK_FALSE(query.value().has_password);

  auto conninfo = parse_pg_url("host=db port = 5432 dbname='my app' password='a b'");
  REQUIRE(conninfo.ok());
  CHECK(conninfo.value().host == "db");
  CHECK(conninfo.value().dbname == "my app");
  CHECK(conninfo.value().has_password);

  CHECK_FALSE(parse_pg_url("localhost:5432").ok());
  CHECK_FALSE(parse_pg_url("host='unclosed").ok());
  CHECK_FALSE(parse_pg_url("mysql://host/db").ok());
  CHECK_FALSE(parse_pg_url("").ok());
}

TEST_CASE("edit distance counts swaps of neighbours as one edit", "[config][url]") {
  CHECK(edit_distance("batch_size", "batch_size") == 0);
  CHECK(edit_distance("bath_size", "batch_size") == 1);
  CHECK(edit_distance("bacth_size", "batch_size") == 1);
  CHECK(edit_distance("", "abc") == 3);
  const std::vector<std::string> keys{"batch_size", "in_flight", "max_attempts"};
  CHECK(closest_match("inflight", keys) == std::optional<std::string>("in_flight"));
  CHECK_FALSE(closest_match("zzz", keys).has_value());
}
