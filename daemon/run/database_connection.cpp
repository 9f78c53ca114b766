// Reconnect-with-backoff around the libpq connection; re-LISTEN after each connect, directly when pooled.
#include "daemon/run/database_connection.hpp"

#include <spdlog/spdlog.h>

#include "config/secrets.hpp"
#include "log/log.hpp"
#include "pg/migrator.hpp"
#include "pg/privileges.hpp"

namespace outboxd::daemon {

DatabaseConnection::DatabaseConnection(const config::Config& config, std::string instance_id, const core::Clock& clock,
                                       core::RandomSource& random, bool verify_listen)
    : config_(config),
      instance_id_(std::move(instance_id)),
      clock_(clock),
      random_(random),
      backoff_({config.database.reconnect_min, config.database.reconnect_max, 2.0, 0.2}),
      verify_listen_(verify_listen) {
  if (!notifications()) {
    spdlog::info("database.pooler is transaction and database.listen_url is not set: no NOTIFY wake-ups, "
                 "new rows are found by polling every {} ms (dispatch.poll_interval_ms)",
                 config.dispatch.poll_interval.count());
  }
}

bool DatabaseConnection::notifications() const {
  if (listen_lost_) return false;
  return config_.database.pooler != config::Pooler::transaction || !config_.database.listen_url.empty();
}

// A LISTEN stays on the server connection that ran it. Behind a pooler in
// transaction mode that server connection is another client's between our
// transactions, and no NOTIFY would ever wake the daemon: a NOTIFY sent from a
// connection of its own must come back on ours, or the daemon polls instead.
// The check needs a second login: when that fails (a role's CONNECTION LIMIT,
// a full pool), the LISTEN is trusted, as it is behind no pooler.
core::Status DatabaseConnection::check_listen() {
  auto sender = open_connection();
  auto sent = sender ? sender.value().exec_params("SELECT pg_catalog.pg_notify($1, '')", {store_->channel()})
                     : core::Result<pg::Rows>(sender.error());
  if (!sent) {
    spdlog::warn("could not check that LISTEN stays on its server connection (a NOTIFY from a second connection: {}); trusting "
                 "it", sent.error().message);
    listen_lost_ = false;
    return {};
  }
  auto arrived = connection_->wait_for_notification(kListenCheck);
  if (!arrived) return arrived.error();
  if (!arrived.value() && !listen_lost_) {
    spdlog::error("a NOTIFY sent to channel {} did not reach this connection within {} ms: its LISTEN did not stay "
                  "(a pooler in transaction mode, e.g. PgBouncer pool_mode = transaction, hands the server connection "
                  "to other clients); set `database.pooler: transaction` (with `database.listen_url` straight to "
                  "PostgreSQL for wake-ups). Until then new rows are found by polling every {} ms",
                  store_->channel(), kListenCheck.count(), config_.dispatch.poll_interval.count());
  }
  listen_lost_ = !arrived.value();
  return {};
}

// A transaction pooler hands each transaction to any server connection, and a
// LISTEN would stay behind on one of them: the wake-ups come over a direct
// connection of their own, or not at all.
core::Status DatabaseConnection::listen() {
  const config::DatabaseConfig& database = config_.database;
  if (database.pooler != config::Pooler::transaction) {
    if (auto listening = store_->listen(); !listening) return listening;
    return verify_listen_ ? check_listen() : core::Status{};
  }
  if (database.listen_url.empty()) return {};
  config::DatabaseConfig direct = database;
  direct.url = database.listen_url;
  direct.target = database.listen_target;
  direct.pooler = config::Pooler::none;
  auto listener = pg::Connection::open(direct, "outboxd " + instance_id_ + " listen");
  if (!listener) {
    login_refused_ = listener.error().kind == core::ErrorKind::fatal;
    return core::Error{listener.error().kind, "database.listen_url: " + listener.error().message};
  }
  listener_.emplace(std::move(listener).value());
  if (auto listening = listener_->listen(store_->channel()); !listening) {
    return core::Error{listening.error().kind, "listening for wake-ups: " + listening.error().message};
  }
  return {};
}

// A binary newer than its schema would fail on the first statement that needs a
// later migration, with PostgreSQL's "does not exist"; this says what to do. It
// ends the run (exit 1): a restart after `outboxd migrate` succeeds. A schema
// without schema_migrations was installed by another tool (psql), which keeps
// its own record: nothing to compare, unless it has no outbox at all.
core::Status DatabaseConnection::check_schema_version() {
  auto applied = pg::applied_version(*connection_, config_.outbox.schema);
  if (!applied) return applied.error();
  const int needed = pg::migrations().back().version;
  if (!applied.value()) {
    auto installed = pg::outbox_installed(*connection_, config_.outbox.schema);
    if (!installed) return installed.error();
    if (installed.value()) return {};
    return core::Error{core::ErrorKind::fatal,
                       "schema " + config_.outbox.schema + " has no outbox tables in this database: run `outboxd "
                       "migrate` (as the schema's owner) before `outboxd run`, or check database.url and outbox.schema"};
  }
  const int found = *applied.value();
  if (found >= needed) return {};
  return core::Error{core::ErrorKind::fatal,
                     "schema " + config_.outbox.schema + " is at migration " + std::to_string(found) +
                         ", and this outboxd needs migration " + std::to_string(needed) +
                         ": run `outboxd migrate` of this version (as the schema's owner) before `outboxd run`"};
}

core::Status DatabaseConnection::ensure_connected() {
  if (state_ == ConnectionState::up || clock_.now() < retry_at_) return {};
  auto connection = open_connection();
  login_refused_ = !connection && connection.error().kind == core::ErrorKind::fatal;
  core::Status ready = connection ? core::Status{} : core::Status{connection.error()};
  if (ready.ok()) {
    connection_.emplace(std::move(connection).value());
    store_.emplace(*connection_, config_.outbox.schema);
    leases_.emplace(*connection_, config_.outbox.schema);
    ready = check_schema_version();
    if (ready.ok()) ready = store_->prepare();
    if (ready.ok()) ready = listen();
    if (ready.ok()) ready = leases_->register_instance(instance_id_);
  }
  if (!ready.ok()) {
    if (ready.error().kind == core::ErrorKind::fatal || ready.error().kind == core::ErrorKind::forbidden) {
      return ready;
    }
    lost(ready.error());
    return {};
  }
  spdlog::log(log::routine(), "database connected ({} attempt{})", failures_ + 1, failures_ == 0 ? "" : "s");
  state_ = ConnectionState::up;
  failures_ = 0;
  fresh_ = true;
  return {};
}

core::Result<pg::Connection> open_database(const config::DatabaseConfig& database,
                                           const std::string& application_name) {
  config::DatabaseConfig with_password = database;
  if (!database.password_file.empty()) {
    auto password = config::read_secret_file(database.password_file, database.password_file);
    if (!password) return core::transient_error("database.password_file: " + password.error().message);
    with_password.password = std::move(password).value();
  }
  return pg::Connection::open(with_password, application_name);
}

core::Result<pg::Connection> DatabaseConnection::open_connection() {
  if (adopted_) {
    core::Result<pg::Connection> adopted(std::move(*adopted_));
    adopted_.reset();
    return adopted;
  }
  return open_database(config_.database, "outboxd " + instance_id_);
}

void DatabaseConnection::lost(const core::Error& error) {
  ++failures_;
  const auto delay = backoff_.delay(failures_, random_);
  // A fatal or forbidden error ends the run; the caller logged it, and there is no retry to announce.
  const bool retrying = error.kind != core::ErrorKind::fatal && error.kind != core::ErrorKind::forbidden;
  if (retrying && (state_ == ConnectionState::up || failures_ == 1)) {
    spdlog::warn("database unavailable: {}; retrying in {} ms", error.message,
                 std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
  }
  state_ = ConnectionState::down;
  leases_.reset();
  store_.reset();
  listener_.reset();
  connection_.reset();
  retry_at_ = clock_.now() + delay;
}

std::string DatabaseConnection::privilege_fix() {
  if (!connection_) return "";
  return pg::dispatcher_privilege_fix(*connection_, config_.outbox.schema);
}

bool DatabaseConnection::just_connected() {
  const bool fresh = fresh_;
  fresh_ = false;
  return fresh;
}

std::optional<core::SteadyTime> DatabaseConnection::next_attempt() const {
  if (state_ == ConnectionState::up) return std::nullopt;
  return retry_at_;
}

pg::Connection& DatabaseConnection::notified_on() { return listener_ ? *listener_ : *connection_; }

int DatabaseConnection::socket() { return state_ == ConnectionState::up ? notified_on().socket() : -1; }

bool DatabaseConnection::drain_notifications() {
  if (state_ != ConnectionState::up) return false;
  auto notified = notified_on().consume_input_and_notifications();
  if (!notified) {
    lost(notified.error());
    return false;
  }
  return notified.value();
}

}  // namespace outboxd::daemon
