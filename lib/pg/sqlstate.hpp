// SQLSTATE codes and lost connections mapped to the error kinds callers act on.
#pragma once

#include <string>
#include <string_view>

#include "core/result.hpp"

namespace outboxd::pg {

// The decision for one SQLSTATE (five characters, e.g. "40001"). An empty code
// means libpq reported the failure itself, which for a statement means the
// connection was lost: transient.
core::ErrorKind classify(std::string_view sqlstate);

// True for codes after which the server closes the connection (class 08,
// admin/crash shutdown, idle timeouts): the connection must be reset.
bool ends_connection(std::string_view sqlstate);

// Everything known about one failed statement or connection attempt.
struct Failure {
  core::ErrorKind kind = core::ErrorKind::fatal;
  std::string sqlstate;          // empty when libpq produced the error itself
  bool connection_lost = false;  // the connection is gone; reset() before the next statement
  // The statement could have committed (a COMMIT, or a statement run in
  // autocommit) when the connection broke: the server may or may not have
  // applied it. Callers must not treat it as failed; re-run only what is idempotent.
  bool outcome_unknown = false;
  std::string message;  // SQLSTATE, primary message, detail, hint; never the conninfo

  core::Error to_error() const { return {kind, message}; }
};

// Builds the failure for a statement that failed with `sqlstate` (maybe
// empty). `connection_lost` comes from PQstatus after the call,
// `commit_in_flight` from whether the statement could commit by itself.
// Without a SQLSTATE, libpq failing to allocate memory counts as a lost
// connection (transient: drop it, reconnect); any other refusal is fatal.
Failure make_failure(std::string_view sqlstate, std::string message, bool connection_lost,
                     bool commit_in_flight);

}  // namespace outboxd::pg

namespace outboxd::pg {

// A connection attempt the server refused with `sqlstate` is fatal only for
// what a person must fix: class 28 (credentials), 3D000 (no such database),
// 42501 (CONNECT not granted), 42704 and 22023 (a startup setting the server
// rejects); so is a password the server asked for and the config lacks
// (`password_missing`). Every other code (57P03 starting up, 53300 too many
// clients, a server in trouble) and libpq's own failures (empty: refused,
// timed out, name not resolved) are transient.
core::ErrorKind classify_connect_failure(std::string_view sqlstate, bool password_missing);

}  // namespace outboxd::pg
