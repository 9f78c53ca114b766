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
  CHECK(uri.value().get("host") == "db.internal");
  CHECK(uri.value().get("port") == "6432");
  CHECK(uri.value().get("dbname") == "orders");
  CHECK(uri.value().get("user") == "app");
  CHECK(uri.value().get("password") == "pw");
  CHECK(uri.value().get("sslmode") == "require");

  auto query = parse_pg_url("postgres:///app?host=%2Fvar%2Frun%2Fpostgresql&port=5433");
  REQUIRE(query.ok());
  CHECK(query.value().get("host") == "/var/run/postgresql");
  CHECK(query.value().get("port") == "5433");
  CHECK(query.value().get("password").empty());

  auto conninfo = parse_pg_url("host=db port = 5432 dbname='my app' password='a b'");
  REQUIRE(conninfo.ok());
  CHECK(conninfo.value().get("host") == "db");
  CHECK(conninfo.value().get("dbname") == "my app");
  CHECK(conninfo.value().get("password") == "a b");

  CHECK_FALSE(parse_pg_url("localhost:5432").ok());
  CHECK_FALSE(parse_pg_url("host='unclosed").ok());
  CHECK_FALSE(parse_pg_url("mysql://host/db").ok());
  CHECK_FALSE(parse_pg_url("").ok());
  CHECK_FALSE(parse_pg_url("postgresql://h/app?bogus=1").ok());
}

TEST_CASE("libpq URIs: percent-encoded keys and secrets as libpq reads them", "[config][url]") {
  auto encoded = parse_pg_url("postgresql://127.0.0.1/app?pass%77ord=s3cr%2FPW&sslpassword=k3yPW");
  REQUIRE(encoded.ok());
  CHECK(encoded.value().get("password") == "s3cr/PW");
  CHECK(encoded.value().get("sslpassword") == "k3yPW");
  // Unescaped ? # : in a password: libpq finds the user info all the same.
  for (const std::string password : {"s3cr?etPW", "s3cr#etPW", "a:b"}) {
    auto target = parse_pg_url("postgresql://outboxd:" + password + "@127.0.0.1:5432/app");
    REQUIRE(target.ok());
    CHECK(target.value().get("password") == password);
    CHECK(target.value().get("host") == "127.0.0.1");
  }
}

TEST_CASE("a password that libpq would spill into host, port or database is refused unquoted", "[config][url]") {
  // libpq reads user info only up to the first '/', and up to the first '@'.
  for (const char* url : {"postgresql://outboxd:s3cr/etPW@127.0.0.1:5432/app", "postgresql://u:12/s3cr@db/app",
                          "postgresql://outboxd:s3@cr@127.0.0.1/app", "host=db port=s3cr",
                          "postgresql://u:s3cr%zz@h/app", "host=db s3cr", "postgresql://h/app?s3cr=1=2"}) {
    INFO(url);
    auto target = parse_pg_url(url);
    REQUIRE_FALSE(target.ok());
    CHECK(target.error().message.find("s3cr") == std::string::npos);
    CHECK(target.error().message.find("cr@") == std::string::npos);
  }
  // libpq's own words stay, its quotes of the text go.
  CHECK(parse_pg_url("host=db s3cr").error().message ==
        "must be a libpq URI (postgresql://user@host:5432/dbname) or a conninfo string (host=... dbname=...); "
        "libpq: missing \"=\" after (withheld) in connection info string");
}

TEST_CASE("describe shows user, host, port, database and sslmode, never a secret", "[config][url]") {
  auto target = parse_pg_url("postgresql://outboxd:pw@db.internal/app?sslmode=verify-full");
  REQUIRE(target.ok());
  CHECK(describe(target.value()) == "outboxd@db.internal:5432/app?sslmode=verify-full");
}

// Redaction by structure: a password equal to, or inside, another part
// leaves that part whole; printing the part must not confirm the password.
TEST_CASE("describe keeps user, host and database whole whatever the password is", "[config][url][redact]") {
  const std::string shown = "secauditor@127.0.0.1:5432/audit_db";
  for (const std::string password : {"d", "127", "secauditor", "audit_db", "p%40ss", "5432"}) {
    INFO(password);
    auto uri = parse_pg_url("postgresql://secauditor:" + password + "@127.0.0.1:5432/audit_db");
    REQUIRE(uri.ok());
    CHECK(describe(uri.value()) == shown);
    auto conninfo = parse_pg_url("host=127.0.0.1 port=5432 user=secauditor dbname=audit_db password=" + password);
    REQUIRE(conninfo.ok());
    CHECK(describe(conninfo.value()) == shown);
  }
  auto at_sign = parse_pg_url("host=127.0.0.1 user=secauditor dbname=audit_db password='secauditor@127'");
  REQUIRE(at_sign.ok());
  CHECK(describe(at_sign.value()) == shown);
  auto query = parse_pg_url("postgresql://127.0.0.1/audit_db?user=secauditor&password=d&sslpassword=a");
  REQUIRE(query.ok());
  CHECK(describe(query.value()) == "secauditor@127.0.0.1:5432/audit_db");
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
