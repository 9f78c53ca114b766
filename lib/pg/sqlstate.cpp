// The one place where PostgreSQL error codes become decisions.
#include "pg/sqlstate.hpp"

#include <array>

namespace outboxd::pg {
namespace {

struct Rule {
  std::string_view prefix;  // a full code, or a two-character class
  core::ErrorKind kind;
};

using core::ErrorKind;

// First match wins, so exact codes precede their classes.
constexpr std::array kRules{
    // Retry later: the server or the network is in trouble, or we lost a race.
    Rule{"40001", ErrorKind::transient},  // serialization failure
    Rule{"40P01", ErrorKind::transient},  // deadlock detected
    Rule{"40003", ErrorKind::transient},  // statement completion unknown
    Rule{"57P01", ErrorKind::transient},  // admin shutdown (pg_terminate_backend, fast stop)
    Rule{"57P02", ErrorKind::transient},  // crash shutdown
    Rule{"57P03", ErrorKind::transient},  // cannot connect now (starting up, recovery)
    Rule{"57P05", ErrorKind::transient},  // idle session timeout
    Rule{"57014", ErrorKind::transient},  // query canceled (statement_timeout)
    Rule{"55P03", ErrorKind::transient},  // lock not available (lock_timeout, NOWAIT)
    Rule{"55006", ErrorKind::transient},  // object in use
    Rule{"25006", ErrorKind::transient},  // read-only transaction: a standby after failover
    Rule{"25P03", ErrorKind::transient},  // idle-in-transaction timeout
    Rule{"58030", ErrorKind::transient},  // I/O error
    Rule{"08", ErrorKind::transient},     // connection exception
    Rule{"53", ErrorKind::transient},     // insufficient resources (disk, memory, connections)
    // The data itself: this row or these values are the problem.
    Rule{"22", ErrorKind::rejected},      // data exception
    Rule{"23", ErrorKind::rejected},      // integrity constraint violation
    Rule{"40002", ErrorKind::rejected},   // deferred constraint failed at commit
    Rule{"54", ErrorKind::rejected},      // program limit exceeded by a value
    Rule{"P0001", ErrorKind::rejected},   // RAISE EXCEPTION from SQL-level validation
    // A missing grant: the role is not the one the deployment meant.
    Rule{"42501", ErrorKind::forbidden},  // insufficient privilege
    // Everything else needs a person: missing schema, credentials, a wrong
    // database. Listed for the reader; the default says the same.
    Rule{"42P01", ErrorKind::fatal},      // undefined table: schema not migrated
    Rule{"42883", ErrorKind::fatal},      // undefined function: schema not migrated
    Rule{"42", ErrorKind::fatal},         // syntax error or access rule violation
    Rule{"28", ErrorKind::fatal},         // invalid authorization
    Rule{"3D000", ErrorKind::fatal},      // database does not exist
};

bool matches(std::string_view sqlstate, std::string_view prefix) {
  return sqlstate.size() == 5 && sqlstate.substr(0, prefix.size()) == prefix;
}

// libpq could not allocate memory ("out of memory", "out of memory for
// query result"): a result too large for this process, not a bug. The
// connection's state is uncertain afterwards, so it is dropped like a lost one:
// reconnect after a backoff and claim again.
bool out_of_memory(std::string_view sqlstate, std::string_view message) {
  return sqlstate.empty() && message.find("out of memory") != std::string_view::npos;
}

}  // namespace

core::ErrorKind classify(std::string_view sqlstate) {
  if (sqlstate.empty()) return ErrorKind::transient;
  for (const Rule& rule : kRules) {
    if (matches(sqlstate, rule.prefix)) return rule.kind;
  }
  return ErrorKind::fatal;
}

bool ends_connection(std::string_view sqlstate) {
  return matches(sqlstate, "08") || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P05" ||
         sqlstate == "25P03";
}

Failure make_failure(std::string_view sqlstate, std::string message, bool connection_lost,
                     bool commit_in_flight) {
  Failure failure;
  failure.sqlstate = std::string(sqlstate);
  failure.connection_lost = connection_lost || ends_connection(sqlstate) || out_of_memory(sqlstate, message);
  if (failure.connection_lost) {
    failure.kind = ErrorKind::transient;
  } else if (sqlstate.empty()) {
    failure.kind = ErrorKind::fatal;  // libpq refused the call itself: a bug, not the weather
  } else {
    failure.kind = classify(sqlstate);
  }
  // A definite error from a live connection means the statement did not commit.
  // Only a broken connection (or the server saying so) leaves the outcome open.
  failure.outcome_unknown = commit_in_flight && (failure.connection_lost || sqlstate == "40003");
  failure.message = std::move(message);
  if (failure.outcome_unknown) failure.message += " (outcome unknown: the statement may have committed)";
  return failure;
}

}  // namespace outboxd::pg

namespace outboxd::pg {

core::ErrorKind classify_connect_failure(std::string_view sqlstate, bool password_missing) {
  if (password_missing) return ErrorKind::fatal;
  // Only what a person must fix: credentials (class 28), a database that
  // does not exist, CONNECT not granted (42501), a startup setting the server
  // rejects (42704 unknown, 22023 bad value). Any other code at login (a
  // server starting, full, failing over or in trouble) and libpq's own
  // failures (refused, timed out, name not resolved) are retried.
  for (const std::string_view code : {"28", "3D000", "42501", "42704", "22023"}) {
    if (matches(sqlstate, code)) return ErrorKind::fatal;
  }
  return ErrorKind::transient;
}

}  // namespace outboxd::pg
