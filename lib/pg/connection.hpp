// One PostgreSQL connection: statements with bound parameters, named prepared statements, LISTEN; or pooled.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "core/result.hpp"
#include "pg/sqlstate.hpp"

namespace outboxd::pg {

// Parameters in text format; nullopt is SQL NULL. Arrays go as literals
// ({1,2,3}, see text_codec.hpp) with a cast in the statement: $1::bigint[].
using Params = std::vector<std::optional<std::string>>;

// Statements as a store defines them: name, text (`outboxd statements` prints them).
using NamedStatements = std::vector<std::pair<std::string, std::string>>;

// Whether a statement's result columns come as text (libpq's default) or in
// PostgreSQL's binary send format. Binary spares bytea its hex encoding on the
// server and the decoding here; Rows reads either.
enum class ResultFormat { text = 0, binary = 1 };

// The rows of one successful statement. The accessors read text and binary
// format alike; binary covers the types the daemon selects: text-like and
// bytea values (their bytes), int2/int4/int8, boolean.
class Rows {
 public:
  Rows();
  ~Rows();
  Rows(Rows&&) noexcept;
  Rows& operator=(Rows&&) noexcept;

  int size() const;
  int columns() const;
  std::string_view column_name(int column) const;  // as the statement names it
  bool is_null(int row, int column) const;
  // The value's bytes: text, or a binary-format text or bytea value. "" for NULL.
  std::string_view text(int row, int column) const;
  std::optional<std::string> optional_text(int row, int column) const;
  std::int64_t int64(int row, int column) const;  // 0 for NULL
  std::optional<std::int64_t> optional_int64(int row, int column) const;
  bool boolean(int row, int column) const;  // false for NULL
  std::int64_t affected() const;  // rows inserted, updated or deleted

 private:
  friend class Connection;
  struct Clear {
    void operator()(void* result) const;
  };
  explicit Rows(void* result);
  bool binary(int column) const;
  std::unique_ptr<void, Clear> result_;
};

class Connection {
 public:
  // Connects with `config.url` (libpq URI or conninfo). The password goes to
  // libpq as its own keyword, never into a string that could be logged.
  // The daemon_settings() are set for the connection through the startup
  // options, or after connecting behind a pooler in session mode. Behind a
  // transaction pooler (config.pooler) no state is kept on the server connection: defined
  // statements run unnamed, each in a transaction of its own that sets them
  // locally; exec() and exec_params() run without them. Each result is
  // awaited for at most statement_timeout + connect_timeout (no limit when
  // statement_timeout is 0); a connection that does not answer within it is
  // given up: the statement fails as a lost connection, ok() turns false.
  static core::Result<Connection> open(const config::DatabaseConfig& config, std::string application_name);

  ~Connection();
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;

  bool ok() const;  // the connection is up as far as libpq knows, and answered in time
  // Reconnects with the same parameters. Prepared statements are prepared
  // again on first use and LISTEN channels re-registered.
  core::Status reset();

  // Simple query protocol: several statements may be separated by `;`.
  // The result of the last one is returned, or the first error.
  core::Result<Rows> exec(std::string_view sql);
  core::Result<Rows> exec_params(std::string_view sql, const Params& params);

  // Names a statement; it is prepared on its first use on each connection.
  void define(std::string name, std::string sql);
  // define() and prepare now, so a missing table shows up at start-up.
  core::Status prepare(std::string name, std::string sql);
  core::Result<Rows> exec_prepared(std::string_view name, const Params& params,
                                   ResultFormat format = ResultFormat::text);

  struct PreparedCall {
    std::string_view name;
    Params params;
    ResultFormat format = ResultFormat::text;
  };
  // Sends every call at once and reads the results in one round trip
  // (libpq pipeline mode with a single sync): they run in one implicit
  // transaction, so all take effect or none, and now() is the same in all.
  // Returns the rows of each call in order, or the first error.
  core::Result<std::vector<Rows>> exec_prepared_pipeline(const std::vector<PreparedCall>& calls);

  // LISTEN on `channel` (quoted, case kept) now and after every reset().
  // Not behind a transaction pooler: the LISTEN would stay on whichever
  // server connection ran it (see database.listen_url).
  core::Status listen(std::string channel);
  // The socket to poll for readability; -1 when not connected.
  int socket() const;
  // Reads what the server sent; true if at least one NOTIFY arrived since
  // the last call (including those that came in during other statements).
  core::Result<bool> consume_input_and_notifications();
  // The same, naming the channel of each NOTIFY that arrived (a listener of many outboxes).
  core::Result<std::vector<std::string>> take_notifications();
  // Waits up to `bound` for the socket; true as soon as a NOTIFY has arrived.
  core::Result<bool> wait_for_notification(std::chrono::milliseconds bound);

  // The transaction ids of this connection's own writes (marks, failures,
  // lease renewals), kept until taken: the next immediate claim tells them
  // from writers' commits (late_commits_possible() in outbox_sql.cpp).
  void note_own_transaction(std::int64_t transaction);
  std::vector<std::int64_t> take_own_transactions();

  // Details of the most recent failure, e.g. whether a commit's outcome is unknown.
  const Failure& last_failure() const;

 private:
  struct State;
  struct Statement;
  explicit Connection(std::unique_ptr<State> state);
  bool not_connected();  // records the failure when true
  bool autocommit() const;
  bool unnamed() const;  // behind a transaction pooler
  core::Status apply_pooler_settings();
  core::Status prepare_now(std::pair<const std::string, Statement>& entry);
  using Entry = std::pair<const std::string, Statement>;
  bool send_pipeline(const std::vector<Entry*>& entries, const std::vector<PreparedCall>& calls);
  core::Result<std::vector<Rows>> run_pipeline(const std::vector<Entry*>& entries,
                                               const std::vector<PreparedCall>& calls);
  core::Result<Rows> conclude(void* result, bool commit_in_flight, std::string_view sql);
  bool await_reply();
  core::Error stall_failure(bool commit_in_flight);
  void* reply(bool sent);  // a PGresult*, or null
  core::Result<Rows> finish(bool sent, bool commit_in_flight, std::string_view sql);

  std::unique_ptr<State> state_;
};

}  // namespace outboxd::pg
