// Connects through PQconnectPoll with verbose errors, finds the server's SQLSTATE in them, keeps the rest for people.
#include "pg/connect_failure.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>

#include "config/url.hpp"
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

// Drives an attempt begun by PQconnectStartParams or PQresetStart to its end.
// Not libpq's blocking calls: the verbosity that puts the server's SQLSTATE in
// the error message must be set between the start and the server's answer.
// `timeout` bounds the whole attempt, every host of the URL included (libpq's
// own loop gives each host connect_timeout afresh).
bool finish_connecting(PGconn* conn, std::chrono::seconds timeout, bool& timed_out) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  timed_out = false;
  for (PostgresPollingStatusType status = PGRES_POLLING_WRITING;; status = PQconnectPoll(conn)) {
    if (status == PGRES_POLLING_OK) return true;
    if (status == PGRES_POLLING_FAILED) return false;
    pollfd ready{PQsocket(conn), static_cast<short>(status == PGRES_POLLING_READING ? POLLIN : POLLOUT), 0};
    int polled = 0;
    do {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      polled = ::poll(&ready, 1, static_cast<int>(left.count()));
    } while (polled < 0 && errno == EINTR);
    if (polled <= 0) {
      timed_out = true;
      return false;
    }
  }
}

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

std::optional<core::Error> complete_connection(PGconn* conn, std::chrono::seconds timeout, std::string_view doing,
                                               const std::vector<std::string>& secrets) {
  PQsetErrorVerbosity(conn, PQERRORS_VERBOSE);
  bool timed_out = false;
  const bool connected = PQstatus(conn) != CONNECTION_BAD && finish_connecting(conn, timeout, timed_out);
  // Statement errors are read field by field (describe()); back to libpq's default for any other text.
  PQsetErrorVerbosity(conn, PQERRORS_DEFAULT);
  if (connected) return std::nullopt;
  if (timed_out) {
    return core::transient_error(std::string(doing) + ": no answer within connect_timeout (" +
                                 std::to_string(timeout.count()) + " s)");
  }
  const ConnectFailure failure = read_connect_failure(PQerrorMessage(conn), PQconnectionNeedsPassword(conn) == 1);
  std::string message(doing);
  message += ": ";
  if (!failure.sqlstate.empty()) message += "[" + failure.sqlstate + "] ";
  message += config::withhold(one_line(failure.text), secrets);
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
