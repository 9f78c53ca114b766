// A connection attempt and its failure, read by SQLSTATE whatever language the server speaks.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.hpp"

struct pg_conn;  // libpq's PGconn

namespace outboxd::pg {

struct ConnectFailure {
  core::ErrorKind kind = core::ErrorKind::transient;
  std::string sqlstate;  // the server's code; empty when libpq failed on its own side
  std::string text;      // libpq's message without the code and the server's source location
};

// `verbose` is libpq's error message for an attempt made with
// PQERRORS_VERBOSE, where a server's error reads "SEVERITY:  SQLSTATE: text"
// and is followed by a "LOCATION:" line (the severity word is translated, the
// code never is). The last code decides: libpq moves on to the next host only
// past errors like 57P03, so the last one ended the attempt.
// `password_missing` is PQconnectionNeedsPassword: the server asked for a
// password and the config has none.
ConnectFailure read_connect_failure(std::string_view verbose, bool password_missing);

// (Re)connects `conn`, a connection begun by PQconnectStartParams or one that
// was lost, as libpq's blocking calls do; nullopt once connected, else the
// error, classified by the server's SQLSTATE, its message starting with `doing`.
std::optional<core::Error> complete_connection(pg_conn* conn, std::string_view doing);

// The error of a failed attempt, as complete_connection() gives it.
core::Error connect_error(pg_conn* conn, std::string_view doing);

// The error of an attempt PQconnectStartParams ended at once: fatal when
// libpq refused its options, transient when no host could be reached.
core::Error start_error(pg_conn* conn, std::string_view doing);

}  // namespace outboxd::pg
