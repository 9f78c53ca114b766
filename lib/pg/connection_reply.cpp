// Connection's reads of a reply: each result awaited within the reply timeout, so a silent server ends the connection.
#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "pg/connection.hpp"
#include "pg/connection_state.hpp"

namespace outboxd::pg {

// statement_timeout bounds a statement on the server only. Through a link
// whose bytes vanish while TCP stays up (a proxy whose server stopped
// answering acknowledges and answers keepalives), or from a server that
// stopped, no reply ever comes and libpq would wait forever; so the daemon
// waits for each result itself, up to reply_timeout, and gives the connection
// up when it passes. True when PQgetResult() will not block.
bool Connection::await_reply() {
  if (state_->reply_timeout.count() == 0) return true;
  PGconn* conn = state_->conn;
  const auto deadline = std::chrono::steady_clock::now() + state_->reply_timeout;
  while (PQisBusy(conn) == 1) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      state_->stalled = true;
      return false;
    }
    pollfd readable{PQsocket(conn), POLLIN, 0};
    // A failed poll or read breaks the connection; PQgetResult() then reports it.
    if (poll(&readable, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) return true;
    if (readable.revents != 0 && PQconsumeInput(conn) == 0) return true;
  }
  return true;
}

core::Error Connection::stall_failure(bool commit_in_flight) {
  state_->last_failure =
      make_failure("", "no reply from PostgreSQL within " + std::to_string(state_->reply_timeout.count()) +
                           " ms (database.statement_timeout_ms + connect_timeout_ms): the server or the link to it "
                           "stopped answering; the connection is given up",
                   true, commit_in_flight);
  return state_->last_failure.to_error();
}

// What PQexec() returns after what was just sent (the last result, or the
// first error), each result awaited within the reply timeout; null when
// nothing was sent or a reply did not come.
void* Connection::reply(bool sent) {
  if (!sent) return nullptr;
  PGresult* kept = nullptr;
  while (await_reply()) {
    PGresult* next = PQgetResult(state_->conn);
    if (next == nullptr) return kept;
    if (kept != nullptr && PQresultStatus(kept) == PGRES_FATAL_ERROR) {
      PQclear(next);
      continue;
    }
    PQclear(kept);
    kept = next;
  }
  PQclear(kept);
  return nullptr;
}

core::Result<Rows> Connection::finish(bool sent, bool commit_in_flight, std::string_view sql) {
  void* result = reply(sent);
  if (state_->stalled) return stall_failure(commit_in_flight);
  return conclude(result, commit_in_flight, sql);
}

}  // namespace outboxd::pg
