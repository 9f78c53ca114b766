// The SQLSTATE classifier and the outcome-unknown rule, as a table of codes.
#include <catch2/catch.hpp>

#include "pg/sqlstate.hpp"

using outboxd::core::ErrorKind;
using namespace outboxd::pg;

TEST_CASE("classify maps SQLSTATE codes to what the caller should do", "[pg]") {
  struct Case {
    const char* code;
    ErrorKind kind;
  };
  const Case cases[] = {
      {"08000", ErrorKind::transient},  // connection exception
      {"08006", ErrorKind::transient},  // connection failure
      {"08P01", ErrorKind::transient},  // protocol violation (class 08)
      {"40001", ErrorKind::transient},  // serialization failure
      {"40P01", ErrorKind::transient},  // deadlock
      {"57P01", ErrorKind::transient},  // admin shutdown
      {"57P02", ErrorKind::transient},  // crash shutdown
      {"57P03", ErrorKind::transient},  // cannot connect now
      {"53000", ErrorKind::transient},  // insufficient resources
      {"53100", ErrorKind::transient},  // disk full
      {"53200", ErrorKind::transient},  // out of memory
      {"53300", ErrorKind::transient},  // too many connections
      {"55P03", ErrorKind::transient},  // lock not available
      {"57014", ErrorKind::transient},  // statement timeout
      {"25006", ErrorKind::transient},  // read-only transaction (standby)
      {"", ErrorKind::transient},       // libpq: connection lost
      {"42501", ErrorKind::forbidden},  // insufficient privilege: exit as a configuration error
      {"42P01", ErrorKind::fatal},      // undefined table
      {"42883", ErrorKind::fatal},      // undefined function
      {"42601", ErrorKind::fatal},      // syntax error (class 42)
      {"42703", ErrorKind::fatal},      // undefined column (class 42)
      {"28000", ErrorKind::fatal},      // invalid authorization
      {"28P01", ErrorKind::fatal},      // invalid password
      {"3D000", ErrorKind::fatal},      // no such database
      {"57P04", ErrorKind::fatal},      // database dropped
      {"55000", ErrorKind::fatal},      // object not in prerequisite state
      {"XX000", ErrorKind::fatal},      // internal error
      {"0A000", ErrorKind::fatal},      // feature not supported
      {"22001", ErrorKind::rejected},   // string data right truncation
      {"22P02", ErrorKind::rejected},   // invalid text representation
      {"22023", ErrorKind::rejected},   // invalid parameter value (require_text)
      {"23505", ErrorKind::rejected},   // unique violation
      {"23514", ErrorKind::rejected},   // check violation
      {"P0001", ErrorKind::rejected},   // RAISE EXCEPTION
  };
  for (const Case& c : cases) {
    INFO("SQLSTATE " << c.code);
    CHECK(classify(c.code) == c.kind);
  }
}

TEST_CASE("classify does not match a class prefix on malformed codes", "[pg]") {
  CHECK(classify("08") == ErrorKind::fatal);
  CHECK(classify("4000") == ErrorKind::fatal);
  CHECK(classify("230000") == ErrorKind::fatal);
}

TEST_CASE("a lost connection during a commit leaves the outcome unknown", "[pg]") {
  SECTION("a missing privilege on a commit: refused, not unknown, the connection lives on") {
    const Failure f = make_failure("42501", "permission denied for function text_ok", false, true);
    CHECK(f.kind == ErrorKind::forbidden);
    CHECK_FALSE(f.outcome_unknown);
    CHECK_FALSE(f.connection_lost);
  }
  SECTION("definite error from a live connection: failed, not unknown") {
    const Failure f = make_failure("23505", "duplicate", false, true);
    CHECK(f.kind == ErrorKind::rejected);
    CHECK_FALSE(f.outcome_unknown);
    CHECK_FALSE(f.connection_lost);
  }
  SECTION("connection lost while a commit was in flight") {
    const Failure f = make_failure("", "server closed the connection unexpectedly", true, true);
    CHECK(f.kind == ErrorKind::transient);
    CHECK(f.connection_lost);
    CHECK(f.outcome_unknown);
    CHECK(f.message.find("outcome unknown") != std::string::npos);
  }
  SECTION("terminated by the administrator during a commit") {
    const Failure f = make_failure("57P01", "terminating connection", false, true);
    CHECK(f.connection_lost);
    CHECK(f.outcome_unknown);
  }
  SECTION("connection lost inside an open transaction before COMMIT: rolled back for sure") {
    const Failure f = make_failure("", "server closed the connection unexpectedly", true, false);
    CHECK(f.kind == ErrorKind::transient);
    CHECK_FALSE(f.outcome_unknown);
  }
  SECTION("the server itself says the completion is unknown") {
    CHECK(make_failure("40003", "statement completion unknown", false, true).outcome_unknown);
  }
  SECTION("libpq out of memory: the connection is dropped and made again, not the run ended") {
    for (const char* message : {"claiming rows: out of memory for query result", "out of memory"}) {
      const Failure f = make_failure("", message, false, false);
      CHECK(f.kind == ErrorKind::transient);
      CHECK(f.connection_lost);
      CHECK_FALSE(f.outcome_unknown);
    }
    CHECK(make_failure("", "out of memory", false, true).outcome_unknown);  // a mark may have committed
    CHECK(make_failure("53200", "out of memory", false, false).kind == ErrorKind::transient);  // the server's
  }
    SECTION("libpq refusing a call on a live connection is a bug, not the weather") {
    CHECK(make_failure("", "number of parameters must be between 0 and 65535", false, false).kind ==
          ErrorKind::fatal);
  }
}

TEST_CASE("connection failures: the server's code decides, credentials and names are fatal", "[pg]") {
  CHECK(classify_connect_failure("28P01", false) == ErrorKind::fatal);  // wrong password
  CHECK(classify_connect_failure("28000", false) == ErrorKind::fatal);  // no pg_hba.conf entry, role without LOGIN
  CHECK(classify_connect_failure("3D000", false) == ErrorKind::fatal);  // no such database
  CHECK(classify_connect_failure("42501", false) == ErrorKind::fatal);  // CONNECT not granted
  CHECK(classify_connect_failure("22023", false) == ErrorKind::fatal);  // a startup option the server rejects
  CHECK(classify_connect_failure("57P03", false) == ErrorKind::transient);  // starting up, shutting down
  CHECK(classify_connect_failure("53300", false) == ErrorKind::transient);  // too many clients
  CHECK(classify_connect_failure("08P01", false) == ErrorKind::transient);
  CHECK(classify_connect_failure("42704", false) == ErrorKind::fatal);      // an unknown startup setting
  CHECK(classify_connect_failure("XX000", false) == ErrorKind::transient);  // a server in trouble: no exit 78
  CHECK(classify_connect_failure("58P01", false) == ErrorKind::transient);
  CHECK(classify_connect_failure("55000", false) == ErrorKind::transient);
  CHECK(classify_connect_failure("", false) == ErrorKind::transient);  // refused, timed out, name not resolved
  CHECK(classify_connect_failure("", true) == ErrorKind::fatal);       // the server asked for a password we lack
}
