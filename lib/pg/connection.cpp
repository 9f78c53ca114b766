// libpq connection: statements, prepared statements re-prepared after reconnect, LISTEN/NOTIFY, poolers.
#include "pg/connection.hpp"

#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <utility>

#include "config/url.hpp"
#include "config/watchdog.hpp"
#include "pg/connect_failure.hpp"
#include "pg/connect_params.hpp"
#include "pg/connection_state.hpp"
#include "pg/text_codec.hpp"

namespace outboxd::pg {

namespace {

// 1-based character position (as PostgreSQL reports it) to a 1-based line.
int line_of(std::string_view sql, long position) {
  int line = 1;
  long characters = 0;
  for (const char c : sql) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80 && ++characters >= position) break;
    if (c == '\n') ++line;
  }
  return line;
}

std::string describe(const PGresult* result, PGconn* conn, std::string_view sql) {
  auto field = [result](int code) -> std::string_view {
    const char* value = result != nullptr ? PQresultErrorField(result, code) : nullptr;
    return value != nullptr ? std::string_view(value) : std::string_view();
  };
  const std::string_view sqlstate = field(PG_DIAG_SQLSTATE);
  const std::string_view primary = field(PG_DIAG_MESSAGE_PRIMARY);
  std::string message;
  if (!sqlstate.empty()) {
    message += '[';
    message += sqlstate;
    message += "] ";
  }
  if (!primary.empty()) {
    message += primary;
  } else {
    const char* text = result != nullptr ? PQresultErrorMessage(result) : "";
    if (text == nullptr || *text == '\0') text = PQerrorMessage(conn);
    message += one_line(text);
  }
  if (const auto detail = field(PG_DIAG_MESSAGE_DETAIL); !detail.empty()) message += "; detail: " + one_line(detail);
  if (const auto hint = field(PG_DIAG_MESSAGE_HINT); !hint.empty()) message += "; hint: " + one_line(hint);
  if (const auto position = parse_int64(field(PG_DIAG_STATEMENT_POSITION)); position && !sql.empty()) {
    message += "; at line " + std::to_string(line_of(sql, static_cast<long>(*position)));
  }
  if (const auto where = field(PG_DIAG_CONTEXT); !where.empty()) message += "; context: " + one_line(where);
  return message;
}

bool is_commit(std::string_view sql) {
  while (!sql.empty() && (sql.front() == ' ' || sql.front() == '\n' || sql.front() == '\t')) sql.remove_prefix(1);
  auto starts = [sql](std::string_view word) {
    if (sql.size() < word.size()) return false;
    for (std::size_t i = 0; i < word.size(); ++i) {
      if ((sql[i] | 0x20) != word[i]) return false;
    }
    return true;
  };
  return starts("commit") || starts("end");
}

void ignore_notice(void*, const char*) {}

// SELECT set_config($1, $2, local), ...: `local` lasts to the end of the
// transaction, like SET LOCAL, which unlike SET LOCAL needs no BEGIN.
std::string set_config_sql(std::size_t count, bool local) {
  std::string sql = "SELECT ";
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) sql += ", ";
    sql += "pg_catalog.set_config($" + std::to_string(2 * i + 1) + ", $" + std::to_string(2 * i + 2) + ", " +
           (local ? "true" : "false") + ")";
  }
  return sql;
}

}  // namespace

// A backend counts against the server's max_connections, and shows in
// pg_stat_activity, until it has exited, which it does a moment after
// PQfinish() told it to. A daemon that closes one connection and opens the
// next at once (a worker between two jobs) would hold one more than its
// budget on the server for that moment. The backend's socket closes as it
// exits: a copy of the descriptor, kept past PQfinish(), reads that end.
// A server that stopped answering is not waited for, and none longer than kBackendExitWait.
constexpr std::chrono::milliseconds kBackendExitWait{200};

void finish_session(PGconn* conn, bool answering) {
  int watch = -1;
  if (answering && PQstatus(conn) == CONNECTION_OK && PQsocket(conn) >= 0) {
    watch = fcntl(PQsocket(conn), F_DUPFD_CLOEXEC, 0);
  }
  PQfinish(conn);
  if (watch < 0) return;
  const auto until = std::chrono::steady_clock::now() + kBackendExitWait;
  std::array<char, 512> discard{};  // what the server still sends: a TLS close_notify
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd readable{watch, POLLIN, 0};
    if (left.count() <= 0 || poll(&readable, 1, static_cast<int>(left.count())) <= 0) break;
    if (read(watch, discard.data(), discard.size()) <= 0) break;  // the end, or an error: gone either way
  }
  close(watch);
}

Connection::Connection(std::unique_ptr<State> state) : state_(std::move(state)) {}
Connection::~Connection() = default;
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;

core::Result<Connection> Connection::open(const config::DatabaseConfig& config, std::string application_name) {
  auto params = connect_params(config, application_name);
  if (!params) return params.error();
  std::vector<const char*> keys;
  std::vector<const char*> values;
  for (const auto& [key, value] : params.value().keywords) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);

  auto state = std::make_unique<State>();
  // expand_dbname 0: the config parsed database.url, dbname is just a name.
  // Only started: complete_connection() makes the attempt that counts.
  state->conn = PQconnectStartParams(keys.data(), values.data(), 0);
  if (state->conn == nullptr) return core::transient_error("cannot connect to PostgreSQL: out of memory");
  if (PQstatus(state->conn) == CONNECTION_BAD) return start_error(state->conn, "cannot connect to PostgreSQL");
  if (auto failed = complete_connection(state->conn, "cannot connect to PostgreSQL")) return *failed;
  // Notices (e.g. "already exists, skipping") would otherwise go to stderr
  // past the daemon's logger.
  PQsetNoticeProcessor(state->conn, ignore_notice, nullptr);
  state->pooler = config.pooler;
  // The server ends a statement after statement_timeout; connect_timeout, what
  // the network may take to answer at all, is the margin on top of it: the
  // bound the watchdog rule holds the loop to.
  if (auto bound = config::database_wait_bound(config)) state->reply_timeout = *bound;
  const Settings settings = daemon_settings(config);
  state->settings_sql = set_config_sql(settings.size(), config.pooler == config::Pooler::transaction);
  for (const auto& [name, value] : settings) {
    state->settings.emplace_back(name);
    state->settings.emplace_back(value);
  }
  Connection connection(std::move(state));
  if (auto applied = connection.apply_pooler_settings(); !applied) return applied.error();
  return connection;
}

// Without a pooler the startup options set them. A pooler in session mode drops
// those, but the server connection is ours until we disconnect (its reset query,
// DISCARD ALL by default, clears them for the next client). Behind a
// transaction pooler, run_pipeline() sends them with every transaction.
core::Status Connection::apply_pooler_settings() {
  if (state_->pooler != config::Pooler::session) return {};
  auto applied = exec_params(state_->settings_sql, state_->settings);
  if (!applied) return applied.error();
  return {};
}

bool Connection::unnamed() const { return state_->pooler == config::Pooler::transaction; }

bool Connection::ok() const {
  return state_ && state_->conn != nullptr && PQstatus(state_->conn) == CONNECTION_OK && !state_->stalled;
}

const Failure& Connection::last_failure() const { return state_->last_failure; }

int Connection::socket() const { return ok() ? PQsocket(state_->conn) : -1; }

void Connection::note_own_transaction(std::int64_t transaction) { state_->own_transactions.push_back(transaction); }

std::vector<std::int64_t> Connection::take_own_transactions() { return std::exchange(state_->own_transactions, {}); }

core::Status Connection::reset() {
  state_->stalled = false;
  state_->own_transactions.clear();
  for (auto& [name, statement] : state_->statements) {
    statement.prepared = false;
    statement.deallocate = false;
  }
  auto failed = complete_connection(state_->conn, "cannot reconnect to PostgreSQL");
  if (failed) {
    state_->last_failure = make_failure("", failed->message, true, false);
    state_->last_failure.kind = failed->kind;
    return state_->last_failure.to_error();
  }
  if (auto applied = apply_pooler_settings(); !applied) return applied;
  for (const std::string& channel : state_->channels) {
    auto listening = exec("LISTEN " + quote_ident(channel));
    if (!listening) return listening.error();
  }
  return {};
}

bool Connection::not_connected() {
  if (ok()) return false;
  state_->last_failure = make_failure("", "not connected to PostgreSQL", true, false);
  return true;
}

core::Result<Rows> Connection::conclude(void* raw, bool commit_in_flight, std::string_view sql) {
  auto* result = static_cast<PGresult*>(raw);
  const ExecStatusType status = result != nullptr ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) return Rows(result);
  const char* code = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string message = status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR
                            ? describe(result, state_->conn, sql)
                            : std::string("unexpected result status ") + PQresStatus(status);
  state_->last_failure = make_failure(code != nullptr ? code : "", std::move(message),
                                      PQstatus(state_->conn) == CONNECTION_BAD, commit_in_flight);
  PQclear(result);
  return state_->last_failure.to_error();
}

bool Connection::autocommit() const { return PQtransactionStatus(state_->conn) == PQTRANS_IDLE; }

core::Result<Rows> Connection::exec(std::string_view sql) {
  if (not_connected()) return state_->last_failure.to_error();
  const std::string text(sql);
  const bool may_commit = autocommit() || is_commit(sql);
  return finish(PQsendQuery(state_->conn, text.c_str()) == 1, may_commit, sql);
}

namespace {

std::vector<const char*> values_of(const Params& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& param : params) values.push_back(param ? param->c_str() : nullptr);
  return values;
}

}  // namespace

core::Result<Rows> Connection::exec_params(std::string_view sql, const Params& params) {
  if (not_connected()) return state_->last_failure.to_error();
  const std::string text(sql);
  const auto values = values_of(params);
  const bool may_commit = autocommit() || is_commit(sql);
  return finish(PQsendQueryParams(state_->conn, text.c_str(), static_cast<int>(values.size()), nullptr,
                                  values.data(), nullptr, nullptr, 0) == 1,
                may_commit, sql);
}

void Connection::define(std::string name, std::string sql) {
  auto [it, inserted] = state_->statements.try_emplace(std::move(name));
  if (!inserted && it->second.sql == sql) return;
  if (it->second.prepared) it->second.deallocate = true;
  it->second.prepared = false;
  it->second.sql = std::move(sql);
}

core::Status Connection::prepare(std::string name, std::string sql) {
  define(name, std::move(sql));
  if (not_connected()) return state_->last_failure.to_error();
  auto& entry = *state_->statements.find(name);
  if (entry.second.prepared) return {};
  return prepare_now(entry);
}

core::Status Connection::prepare_now(std::pair<const std::string, Statement>& entry) {
  auto& [name, statement] = entry;
  if (statement.deallocate) {
    auto dropped = exec("DEALLOCATE " + quote_ident(name));
    if (!dropped) return dropped.error();
    statement.deallocate = false;
  }
  // Unnamed behind a transaction pooler: only checked (tables, columns), as
  // the next transaction may run on another server connection.
  auto prepared =
      finish(PQsendPrepare(state_->conn, unnamed() ? "" : name.c_str(), statement.sql.c_str(), 0, nullptr) == 1, false,
             statement.sql);
  if (!prepared) {
    state_->last_failure.message = "preparing " + name + ": " + state_->last_failure.message;
    // This connection never prepared it: another client did, on the server
    // connection a transaction pooler lent us.
    if (state_->last_failure.sqlstate == "42P05") {
      state_->last_failure.message +=
          "; a pooler in transaction mode (PgBouncer pool_mode = transaction) shares server connections between "
          "clients, so prepared statements and LISTEN cannot work: set `database.pooler: transaction` (and "
          "`database.listen_url` straight to PostgreSQL for NOTIFY wake-ups)";
    }
    return state_->last_failure.to_error();
  }
  statement.prepared = !unnamed();
  return {};
}

core::Result<Rows> Connection::exec_prepared(std::string_view name, const Params& params, ResultFormat format) {
  auto it = state_->statements.find(name);
  if (it == state_->statements.end()) {
    state_->last_failure = make_failure("", "no statement named " + std::string(name), false, false);
    return state_->last_failure.to_error();
  }
  if (not_connected()) return state_->last_failure.to_error();
  if (unnamed()) {
    auto rows = run_pipeline({&*it}, {{it->first, params, format}});
    if (!rows) return rows.error();
    return std::move(rows.value().front());
  }
  const auto values = values_of(params);
  for (int attempt = 0;; ++attempt) {
    if (!it->second.prepared) {
      if (auto prepared = prepare_now(*it); !prepared) return prepared.error();
    }
    const bool may_commit = autocommit();
    auto* result = static_cast<PGresult*>(reply(PQsendQueryPrepared(state_->conn, it->first.c_str(),
                                                                     static_cast<int>(values.size()), values.data(),
                                                                     nullptr, nullptr, static_cast<int>(format)) == 1));
    if (state_->stalled) return stall_failure(may_commit);
    const char* code = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
    // 26000: the server forgot the statement (DISCARD ALL, a pooler handing
    // us another server connection); prepare it again once.
    if (attempt == 0 && code != nullptr && std::string_view(code) == "26000") {
      PQclear(result);
      it->second.prepared = false;
      continue;
    }
    return conclude(result, may_commit, it->second.sql);
  }
}

core::Result<std::vector<Rows>> Connection::exec_prepared_pipeline(const std::vector<PreparedCall>& calls) {
  if (not_connected()) return state_->last_failure.to_error();
  std::vector<Entry*> entries;
  entries.reserve(calls.size());
  for (const auto& call : calls) {
    auto it = state_->statements.find(call.name);
    if (it == state_->statements.end()) {
      state_->last_failure = make_failure("", "no statement named " + std::string(call.name), false, false);
      return state_->last_failure.to_error();
    }
    entries.push_back(&*it);
  }
  for (int attempt = 0;; ++attempt) {
    for (Entry* entry : entries) {
      if (entry->second.prepared || unnamed()) continue;
      if (auto prepared = prepare_now(*entry); !prepared) return prepared.error();
    }
    auto results = run_pipeline(entries, calls);
    // 26000: the server forgot a statement (see exec_prepared); prepare them all again once.
    if (attempt == 0 && !results && state_->last_failure.sqlstate == "26000") {
      for (Entry* entry : entries) entry->second.prepared = false;
      continue;
    }
    return results;
  }
}

// Behind a transaction pooler every statement is unnamed (Parse, Bind,
// Execute) and the pipeline starts with the settings, local to its
// transaction: one Sync, so one transaction on one server connection.
bool Connection::send_pipeline(const std::vector<Entry*>& entries, const std::vector<PreparedCall>& calls) {
  PGconn* conn = state_->conn;
  // `name` null: the unnamed statement, parsed from `sql` in this pipeline.
  auto send = [conn](const std::string& sql, const char* name, const Params& params, ResultFormat format) {
    const auto values = values_of(params);
    const auto count = static_cast<int>(values.size());
    const int binary = static_cast<int>(format);
    if (name != nullptr) return PQsendQueryPrepared(conn, name, count, values.data(), nullptr, nullptr, binary) == 1;
    return PQsendQueryParams(conn, sql.c_str(), count, nullptr, values.data(), nullptr, nullptr, binary) == 1;
  };
  if (unnamed() && !send(state_->settings_sql, nullptr, state_->settings, ResultFormat::text)) return false;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const char* name = unnamed() ? nullptr : entries[i]->first.c_str();
    if (!send(entries[i]->second.sql, name, calls[i].params, calls[i].format)) return false;
  }
  return true;
}

core::Result<std::vector<Rows>> Connection::run_pipeline(const std::vector<Entry*>& entries,
                                                         const std::vector<PreparedCall>& calls) {
  PGconn* conn = state_->conn;
  const bool may_commit = autocommit();
  auto broken = [&](const char* doing) {
    if (state_->stalled) return stall_failure(may_commit);
    state_->last_failure = make_failure("", std::string(doing) + ": " + one_line(PQerrorMessage(conn)),
                                        PQstatus(conn) == CONNECTION_BAD, may_commit);
    return state_->last_failure.to_error();
  };
  if (PQenterPipelineMode(conn) != 1) return broken("entering pipeline mode");
  if (!send_pipeline(entries, calls)) return broken("sending a pipelined statement");
  if (PQpipelineSync(conn) != 1) return broken("sending a pipeline sync");
  std::vector<Rows> rows;
  rows.reserve(calls.size());
  std::optional<core::Error> first_error;
  const std::size_t skipped = unnamed() ? 1 : 0;  // the settings' result
  auto next_result = [&]() { return await_reply() ? PQgetResult(conn) : nullptr; };
  for (std::size_t i = 0; i < skipped + calls.size(); ++i) {
    PGresult* result = next_result();
    if (result == nullptr) return broken("reading a pipelined result");
    // Each statement's results end with a null; statements after a failed
    // one come back PIPELINE_ABORTED and are dropped with it.
    while (PGresult* extra = next_result()) PQclear(extra);
    if (state_->stalled) {
      PQclear(result);
      return broken("reading a pipelined result");
    }
    if (first_error) {
      PQclear(result);
      continue;
    }
    auto concluded = conclude(result, may_commit, i < skipped ? state_->settings_sql : entries[i - skipped]->second.sql);
    if (!concluded) {
      first_error = concluded.error();
    } else if (i >= skipped) {
      rows.push_back(std::move(concluded).value());
    }
  }
  PGresult* sync = next_result();
  const bool synced = sync != nullptr && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
  PQclear(sync);
  if (!synced || PQexitPipelineMode(conn) != 1) return broken("ending a pipeline");
  if (first_error) return *first_error;
  return rows;
}

core::Status Connection::listen(std::string channel) {
  const std::string statement = "LISTEN " + quote_ident(channel);
  bool known = false;
  for (const auto& existing : state_->channels) known = known || existing == channel;
  if (!known) state_->channels.push_back(std::move(channel));
  auto listening = exec(statement);
  if (!listening) return listening.error();
  return {};
}

core::Result<std::vector<std::string>> Connection::take_notifications() {
  if (not_connected()) return state_->last_failure.to_error();
  if (PQconsumeInput(state_->conn) == 0) {
    state_->last_failure = make_failure("", "reading from PostgreSQL: " + one_line(PQerrorMessage(state_->conn)), true,
                                        false);
    return state_->last_failure.to_error();
  }
  std::vector<std::string> channels;
  while (PGnotify* notification = PQnotifies(state_->conn)) {
    channels.emplace_back(notification->relname);
    PQfreemem(notification);
  }
  return channels;
}

core::Result<bool> Connection::consume_input_and_notifications() {
  auto channels = take_notifications();
  if (!channels) return channels.error();
  return !channels.value().empty();
}

core::Result<bool> Connection::wait_for_notification(std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    auto notified = consume_input_and_notifications();
    if (!notified || notified.value()) return notified;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd readable{socket(), POLLIN, 0};
    ::poll(&readable, 1, static_cast<int>(left.count()));  // EINTR or not: read what came, look at the time
  }
}

}  // namespace outboxd::pg
