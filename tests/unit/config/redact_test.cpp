// Passwords removed from libpq URIs, conninfo strings and AMQP URLs.
#include <catch2/catch.hpp>

#include "config/redact.hpp"

using outboxd::config::redact;

TEST_CASE("the password of a URI's user info is removed, the user kept", "[config][redact]") {
  CHECK(redact("postgresql://app:s3cret@db:5432/app") == "postgresql://app@db:5432/app");
  CHECK(redact("amqps://guest:guest@broker:5671") == "amqps://guest@broker:5671");
  CHECK(redact("postgres://app:@db/app") == "postgres://app@db/app");
  CHECK(redact("postgresql://app@db/app") == "postgresql://app@db/app");
  CHECK(redact("amqp://127.0.0.1:5672") == "amqp://127.0.0.1:5672");
  CHECK(redact("postgresql://u:p%40ss@h1:5432,h2:5433/db") == "postgresql://u@h1:5432,h2:5433/db");
}

TEST_CASE("a password with unescaped @ or / does not leak", "[config][redact]") {
  CHECK(redact("postgresql://app:p@ss@db/app") == "postgresql://app@db/app");
  CHECK(redact("postgresql://app:pa/ss@db/app") == "postgresql://app@db/app");
}

TEST_CASE("a password query parameter is removed", "[config][redact]") {
  CHECK(redact("postgresql://db/app?user=app&password=s3cret&sslmode=require") ==
        "postgresql://db/app?user=app&sslmode=require");
  CHECK(redact("postgresql://db/app?password=s3cret") == "postgresql://db/app");
  CHECK(redact("postgresql://db/app?sslmode=require#frag") == "postgresql://db/app?sslmode=require#frag");
}

TEST_CASE("a conninfo password pair is removed, quoted or not", "[config][redact]") {
  CHECK(redact("host=db password=s3cret dbname=app") == "host=db dbname=app");
  CHECK(redact("host=db password = 's3 \\'cret' dbname=app") == "host=db dbname=app");
  CHECK(redact("password=s3cret") == "");
  CHECK(redact("host=db dbname=app password=x") == "host=db dbname=app");
  CHECK(redact("host=db passwordfile=/x") == "host=db passwordfile=/x");
  CHECK(redact("host=db mypassword=x") == "host=db mypassword=x");
}

TEST_CASE("sslpassword, percent-encoded keys and unescaped ? # / in a password are removed", "[config][redact]") {
  CHECK(redact("postgresql://db/app?pass%77ord=s3cret&sslpassword=k3y&sslmode=require") ==
        "postgresql://db/app?sslmode=require");
  CHECK(redact("host=db sslpassword=k3y dbname=app") == "host=db dbname=app");
  CHECK(redact("postgresql://outboxd:s3cr?etPW@127.0.0.1:5432/app") == "postgresql://outboxd@127.0.0.1:5432/app");
  CHECK(redact("postgresql://outboxd:s3cr#etPW@127.0.0.1:5432/app") == "postgresql://outboxd@127.0.0.1:5432/app");
  CHECK(redact("postgresql://outboxd:s3cr/etPW@127.0.0.1:5432/app") == "postgresql://outboxd@127.0.0.1:5432/app");
  // An '@' in a query value costs the text before it, never a password.
  CHECK(redact("postgresql://db/app?password=s3cret&user=a@b").find("s3cret") == std::string::npos);
}

TEST_CASE("a password equal to another part removes the password alone", "[config][redact]") {
  CHECK(redact("postgresql://app:app@db/app") == "postgresql://app@db/app");
  CHECK(redact("postgresql://d:d@d/d?password=d") == "postgresql://d@d/d");
  CHECK(redact("amqp://127:127@127.0.0.1:5672") == "amqp://127@127.0.0.1:5672");
  CHECK(redact("host=d user=d password=d dbname=d") == "host=d user=d dbname=d");
  CHECK(redact("host=db user=app sslpassword=app dbname=app") == "host=db user=app dbname=app");
}
