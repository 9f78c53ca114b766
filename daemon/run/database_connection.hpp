// The Database port on libpq: the main thread's connection, reconnected with backoff, LISTEN (directly when pooled).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "core/clock.hpp"
#include "core/result.hpp"
#include "daemon/run/ports.hpp"
#include "dispatch/backoff.hpp"
#include "pg/connection.hpp"
#include "pg/lease_store.hpp"
#include "pg/outbox_store.hpp"

namespace outboxd::daemon {

// A connection to `database` for `application_name`, its password_file read
// now: a rotated password is used from the next connection on; an unreadable
// file fails the attempt (retried).
core::Result<pg::Connection> open_database(const config::DatabaseConfig& database,
                                           const std::string& application_name);

// Explicit connection states, checked by the loop (no nested callbacks).
enum class ConnectionState { down, up };

// Also the RowStore and LeaseStore ports: each statement goes to the
// pg::OutboxStore or pg::LeaseStore of the current connection.
class DatabaseConnection final : public Database, public RowStore, public LeaseStore {
 public:
  // `verify_listen` false: the LISTEN is trusted without the NOTIFY sent from
  // a second connection, which a daemon of many outboxes has no budget for
  // (database.pooler says whether a pooler is in the way).
  DatabaseConnection(const config::Config& config, std::string instance_id, const core::Clock& clock,
                     core::RandomSource& random, bool verify_listen = true);

  // Connects when down and the backoff allows it. A fatal error (bad
  // credentials, schema not migrated) or a missing privilege (forbidden) is
  // returned so the daemon can exit; transient ones only schedule the next attempt.
  core::Status ensure_connected() override;

  // Every operation that failed transiently calls this with the reason.
  void lost(const core::Error& error) override;

  // For a statement refused for a missing privilege (ErrorKind::forbidden):
  // what to grant, asked of the refused connection, so call it before lost().
  std::string privilege_fix() override;
  bool login_refused() const override { return login_refused_; }

  bool up() const override { return state_ == ConnectionState::up; }
  bool just_connected() override;  // true once after each successful (re)connect
  std::optional<core::SteadyTime> next_attempt() const override;
  // Whether NOTIFY can wake the daemon: not behind a transaction pooler
  // without database.listen_url, where it relies on its poll.
  bool notifications() const override;
  int socket() override;  // where NOTIFY arrives
  bool drain_notifications() override;  // true if a NOTIFY arrived

  // A connection opened before the first connect, by a caller that looked at
  // the outbox before registering (a tenant's serve job): the first connect
  // uses it instead of opening one.
  void adopt(pg::Connection connection) { adopted_.emplace(std::move(connection)); }

  // The connection itself while up, for statements beyond the ports' (the watcher's); else none.
  pg::Connection* connection() { return up() ? &*connection_ : nullptr; }

  RowStore& rows() override { return *this; }
  LeaseStore& leases() override { return *this; }

  // RowStore
  core::Result<core::ClaimedSets> claim(const std::vector<int>& partitions, int limit, core::RowId after_id,
                                        std::span<const core::RowId> known, const core::ClaimBytes& bytes,
                                        const core::LaneRequest& lanes,
                                        const std::optional<std::string>& horizon) override {
    return store_->claim(partitions, limit, after_id, known, bytes, lanes, horizon);
  }
  core::Status refresh_statistics() override { return store_->refresh_statistics(); }
  core::Result<int> mark_dispatched(const std::vector<core::RowId>& ids, config::RetentionMode mode,
                                    std::string_view owner) override {
    return store_->mark_dispatched(ids, mode, owner);
  }
  core::Result<int> record_failures(const std::vector<pg::FailureRecord>& failures,
                                    std::string_view owner) override {
    return store_->record_failures(failures, owner);
  }
  core::Result<int> purge(std::chrono::milliseconds keep_for, int batch) override {
    return store_->purge(keep_for, batch);
  }
  core::Result<pg::BacklogReport> backlog(const std::vector<int>& partitions, int count_cap,
                                          int max_destinations) override {
    return store_->backlog(partitions, count_cap, max_destinations);
  }
  core::Result<pg::BacklogReport> backlog_of(const std::vector<int>& partitions, int count_cap, int max_destinations,
                                             const std::vector<std::string>& destinations) override {
    return store_->backlog_of(partitions, count_cap, max_destinations, destinations);
  }
  core::Result<pg::FailedPurge> purge_failed(std::chrono::milliseconds keep_for, int batch) override {
    return store_->purge_failed(keep_for, batch);
  }
  core::Status arm_notify(std::string_view instance_id, bool armed) override {
    return store_->arm_notify(instance_id, armed);
  }
  core::Result<std::vector<std::string>> open_transactions() override { return store_->open_transactions(); }
  core::Result<std::vector<std::string>> still_open(const std::vector<std::string>& transactions) override {
    return store_->still_open(transactions);
  }
  core::Result<pg::StandbyPosition> standby_position(const std::optional<std::string>& standby) override {
    return store_->standby_position(standby);
  }

  // LeaseStore
  core::Result<std::vector<pg::Lease>> balance(std::string_view instance_id, std::chrono::milliseconds ttl) override {
    return leases_->balance(instance_id, ttl);
  }
  core::Status hand_back(std::string_view instance_id, const std::vector<int>& partitions) override {
    return leases_->hand_back(instance_id, partitions);
  }
  core::Status hand_back_all(std::string_view instance_id) override { return leases_->hand_back_all(instance_id); }
  core::Status deregister(std::string_view instance_id) override { return leases_->deregister(instance_id); }

 private:
  core::Result<pg::Connection> open_connection();

  const config::Config& config_;
  std::string instance_id_;
  const core::Clock& clock_;
  core::RandomSource& random_;
  dispatch::Backoff backoff_;
  ConnectionState state_ = ConnectionState::down;
  int failures_ = 0;
  bool fresh_ = false;
  bool login_refused_ = false;
  bool verify_listen_;
  bool listen_lost_ = false;  // check_listen() saw no NOTIFY come back: poll
  // Ample for a NOTIFY between two connections to one server; paid only when it never comes.
  static constexpr std::chrono::milliseconds kListenCheck{2000};
  core::SteadyTime retry_at_{};
  core::Status listen();
  core::Status check_listen();
  core::Status check_schema_version();
  pg::Connection& notified_on();

  std::optional<pg::Connection> adopted_;  // adopt()'s, until the first connect
  std::optional<pg::Connection> connection_;
  std::optional<pg::Connection> listener_;  // LISTEN on database.listen_url
  std::optional<pg::OutboxStore> store_;
  std::optional<pg::LeaseStore> leases_;
};

}  // namespace outboxd::daemon
