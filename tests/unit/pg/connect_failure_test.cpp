// read_connect_failure: the server's SQLSTATE out of libpq's verbose connection error, in any language.
#include <catch2/catch.hpp>

#include "pg/connect_failure.hpp"

using outboxd::core::ErrorKind;
using outboxd::pg::read_connect_failure;

TEST_CASE("a connection error is read by its SQLSTATE, not its words", "[pg]") {
  SECTION("a German server refusing the password: fatal, the code and the location gone from the text") {
    const auto failure = read_connect_failure(
        "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  28P01: Passwort-Authentifizierung für "
        "Benutzer »outboxd« fehlgeschlagen\nLOCATION:  auth_failed, auth.c:334\n",
        false);
    CHECK(failure.kind == ErrorKind::fatal);
    CHECK(failure.sqlstate == "28P01");
    CHECK(failure.text ==
          "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  Passwort-Authentifizierung für Benutzer "
          "»outboxd« fehlgeschlagen\n");
  }
  SECTION("the last server error of several hosts decides") {
    const auto failure = read_connect_failure(
        "connection to server at \"a\", port 5432 failed: FATAL:  57P03: le système de bases de données se lance\n"
        "LOCATION:  ProcessStartupPacket, postmaster.c:2464\n"
        "connection to server at \"b\", port 5432 failed: FATAL:  3D000: la base de données « app » n'existe pas\n"
        "LOCATION:  InitPostgres, postinit.c:948\n",
        false);
    CHECK(failure.sqlstate == "3D000");
    CHECK(failure.kind == ErrorKind::fatal);
    CHECK(failure.text.find("LOCATION") == std::string::npos);
    CHECK(failure.text.find("57P03") == std::string::npos);
  }
  SECTION("a server not accepting connections yet: transient") {
    CHECK(read_connect_failure("failed: FATAL:  57P03: das Datenbanksystem startet\n", false).kind ==
          ErrorKind::transient);
  }
  SECTION("libpq failing on its side has no code: transient, unless the config lacks a password") {
    const auto refused = read_connect_failure(
        "connection to server at \"127.0.0.1\", port 5432 failed: Connection refused\n\tIs the server running on "
        "that host and accepting TCP/IP connections?\n",
        false);
    CHECK(refused.kind == ErrorKind::transient);
    CHECK(refused.sqlstate.empty());
    CHECK(refused.text.find("Connection refused") != std::string::npos);
    CHECK(read_connect_failure("connection to server at \"h\", port 5432 failed: fe_sendauth: no password supplied\n",
                               true)
              .kind == ErrorKind::fatal);
  }
}
