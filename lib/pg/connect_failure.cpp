// Connects with verbose errors, finds the server's SQLSTATE in them, keeps the rest for people.
#include "pg/connect_failure.hpp"

#include <libpq-fe.h>

#include "pg/sqlstate.hpp"
#include "pg/text_codec.hpp"

namespace outboxd::pg {
namespace {

constexpr std::string_view kAfterSeverity = ":  ";

bool sqlstate_char(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'); }

// Where "SQLSTATE: " starts right after a severity's ":  ", at or after `from`; npos if nowhere.
std::size_t next_code(std::string_view text, std::size_t from) {
  for (std::size_t at = text.find(kAfterSeverity, from); at != std::string_view::npos;
       at = text.find(kAfterSeverity, at + 1)) {
    const std::size_t code = at + kAfterSeverity.size();
    if (text.size() < code + 7 || text.substr(code + 5, 2) != ": ") continue;
    bool valid = true;
    for (std::size_t i = code; i < code + 5; ++i) valid = valid && sqlstate_char(text[i]);
    if (valid) return code;
  }
  return std::string_view::npos;
}

// The server's source file and line help its developers, not the operator.
bool location_line(std::string_view line) { return line.substr(0, 9) == "LOCATION:"; }

}  // namespace

ConnectFailure read_connect_failure(std::string_view verbose, bool password_missing) {
  ConnectFailure failure;
  std::size_t copied = 0;
  for (std::size_t code = next_code(verbose, 0); code != std::string_view::npos; code = next_code(verbose, code)) {
    failure.sqlstate = std::string(verbose.substr(code, 5));
    failure.text += verbose.substr(copied, code - copied);
    copied = code + 7;
  }
  failure.text += verbose.substr(copied);
  std::string kept;
  for (std::size_t start = 0; start < failure.text.size();) {
    std::size_t end = failure.text.find('\n', start);
    end = end == std::string::npos ? failure.text.size() : end + 1;
    const std::string_view line = std::string_view(failure.text).substr(start, end - start);
    if (!location_line(line)) kept += line;
    start = end;
  }
  failure.text = std::move(kept);
  failure.kind = classify_connect_failure(failure.sqlstate, password_missing);
  return failure;
}

// PQreset is libpq's own blocking attempt: every host of the URL in turn,
// each given connect_timeout afresh, target_session_attrs checked; the
// verbosity set before it puts the server's SQLSTATE in the message. A
// connection begun by PQconnectStartParams is only started (no startup packet
// yet): dropping it for the attempt costs the server a fork, no log line.
std::optional<core::Error> complete_connection(PGconn* conn, std::string_view doing) {
  PQsetErrorVerbosity(conn, PQERRORS_VERBOSE);
  PQreset(conn);
  // Statement errors are read field by field (describe()); back to libpq's default for any other text.
  PQsetErrorVerbosity(conn, PQERRORS_DEFAULT);
  if (PQstatus(conn) == CONNECTION_OK) return std::nullopt;
  return connect_error(conn, doing);
}

// libpq checks its options before it tries any host, and refuses a bad one
// with a message of its own (`invalid sslmode value: "x"`, `could not match
// 2 port numbers to 3 hosts`). This process never sets a locale, so libpq
// writes those untranslated; no server is involved. Anything else that ends
// an attempt at its start (every host refused at once) is the weather.
core::Error start_error(PGconn* conn, std::string_view doing) {
  core::Error error = connect_error(conn, doing);
  const std::string_view text = PQerrorMessage(conn);
  if (text.starts_with("invalid ") || text.starts_with("could not match ")) error.kind = core::ErrorKind::fatal;
  return error;
}

core::Error connect_error(PGconn* conn, std::string_view doing) {
  const ConnectFailure failure = read_connect_failure(PQerrorMessage(conn), PQconnectionNeedsPassword(conn) == 1);
  std::string message(doing);
  message += ": ";
  if (!failure.sqlstate.empty()) message += "[" + failure.sqlstate + "] ";
  message += one_line(failure.text);
  if (PQconnectionNeedsPassword(conn) == 1) message += " (set database.password or database.password_file)";
  // PgBouncer refuses the startup `options` outboxd sends straight to
  // PostgreSQL ("unsupported startup parameter") with this code, while other
  // 08P01 refusals (its server down) pass: retried, but say what would fix it.
  if (failure.sqlstate == "08P01") {
    message += " (if database.url points at a pooler such as PgBouncer, set `database.pooler: transaction` or "
               "`session` as its pool_mode)";
  }
  return core::Error{failure.kind, std::move(message)};
}

}  // namespace outboxd::pg
