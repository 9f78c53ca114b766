// Connection's private state, shared by the files that implement Connection.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pg/connection.hpp"

namespace outboxd::pg {

struct Connection::Statement {
  std::string sql;
  bool prepared = false;    // on the current connection
  bool deallocate = false;  // prepared under this name with other text
};

// Ends the session and waits, briefly, for its server backend to exit (see connection.cpp).
void finish_session(PGconn* conn, bool answering);

struct Connection::State {
  PGconn* conn = nullptr;
  config::Pooler pooler = config::Pooler::none;
  std::string settings_sql;  // set_config() of daemon_settings(), see apply_pooler_settings()
  Params settings;
  std::map<std::string, Statement, std::less<>> statements;
  std::vector<std::string> channels;
  Failure last_failure;
  std::chrono::milliseconds reply_timeout{0};  // 0: wait as long as libpq does (forever)
  bool stalled = false;  // a reply did not come within reply_timeout: the connection is given up
  std::vector<std::int64_t> own_transactions;  // see Connection::note_own_transaction()

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (conn != nullptr) finish_session(conn, !stalled);
  }
};

}  // namespace outboxd::pg
