// The main thread's PostgreSQL session: connect, reconnect with backoff, LISTEN (directly when pooled).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "core/clock.hpp"
#include "core/result.hpp"
#include "dispatch/backoff.hpp"
#include "pg/connection.hpp"
#include "pg/lease_store.hpp"
#include "pg/outbox_store.hpp"

namespace outboxd::daemon {

// Explicit connection states, checked by the loop (no nested callbacks).
enum class LinkState { down, up };

class DatabaseLink {
 public:
  DatabaseLink(const config::Config& config, std::string instance_id, const core::Clock& clock,
               core::RandomSource& random);

  // Connects when down and the backoff allows it. A fatal error (bad
  // credentials, schema not migrated) or a missing privilege (forbidden) is
  // returned so the daemon can exit; transient ones only schedule the next attempt.
  core::Status ensure_connected();

  // Every operation that failed transiently calls this with the reason.
  void lost(const core::Error& error);

  // For a statement refused for a missing privilege (ErrorKind::forbidden):
  // what to grant, asked of the refused session, so call it before lost().
  std::string privilege_fix();

  bool up() const { return state_ == LinkState::up; }
  bool just_connected();  // true once after each successful (re)connect
  std::optional<core::SteadyTime> next_attempt() const;
  // Whether NOTIFY can wake the daemon: not behind a transaction pooler
  // without database.listen_url, where it relies on its poll.
  bool notifications() const;
  int socket();  // where NOTIFY arrives
  bool drain_notifications();  // true if a NOTIFY arrived

  pg::OutboxStore& store() { return *store_; }
  pg::LeaseStore& leases() { return *leases_; }

 private:
  core::Result<pg::Connection> open_connection() const;

  const config::Config& config_;
  std::string instance_id_;
  const core::Clock& clock_;
  core::RandomSource& random_;
  dispatch::Backoff backoff_;
  LinkState state_ = LinkState::down;
  int failures_ = 0;
  bool fresh_ = false;
  core::SteadyTime retry_at_{};
  core::Status listen();
  pg::Connection& notified_on();

  std::optional<pg::Connection> connection_;
  std::optional<pg::Connection> listener_;  // LISTEN on database.listen_url
  std::optional<pg::OutboxStore> store_;
  std::optional<pg::LeaseStore> leases_;
};

}  // namespace outboxd::daemon
