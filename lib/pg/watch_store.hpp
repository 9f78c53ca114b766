// Watching a dormant outbox: a registration that asks for NOTIFYs without a share, and one cheap look for work.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "pg/connection.hpp"

namespace outboxd::pg {

// What one look at a dormant outbox saw (WatchStore::check()).
struct WatchCheck {
  // Changes whenever the set of rows that could become claimable changes
  // (within the caps of watch_store.cpp): equal signatures, nothing came
  // that a RunLoop could send.
  std::string signature;
  // Until the earliest scheduled row or backoff of any partition falls due
  // (database clock, rounded up); none when nothing waits.
  std::optional<std::chrono::milliseconds> next_due;
  // Until the last live lease another instance holds on the outbox expires
  // (database clock, rounded up): it serves the outbox now; none when no
  // other instance holds one.
  std::optional<std::chrono::milliseconds> other_lease;
  // One of those instances took a lease before the asking one took its
  // first (or the asking one holds none): of two that began to serve the
  // outbox at the same moment, it keeps it.
  bool other_first = false;
};

// Plain autocommit statements on one outbox schema, as LeaseStore's: they
// work behind PgBouncer in transaction mode. A watcher's row in
// <schema>.instances (030_watchers.sql) is idle, so that inserts NOTIFY
// channel(), and watching, so that no balancer counts it for the share.
class WatchStore {
 public:
  WatchStore(Connection& connection, std::string schema);
  // The statements it defines for outbox schema `schema`, by name.
  static NamedStatements statements(const std::string& schema);

  // Upserts the watcher's row (idle, watching, heartbeat now). Called again,
  // it is the heartbeat that keeps forget_silent_instances() off the row.
  core::Status watch(std::string_view watcher_id);
  // Removes the row, through deregister_instance() (the dispatcher may not DELETE).
  core::Status unwatch(std::string_view watcher_id);
  // One statement; each part bounded (watch_store.cpp). `instance_id`: the
  // asking daemon's, whose own leases are not another's.
  core::Result<WatchCheck> check(std::string_view instance_id);
  // "<schema>_wakeup", where inserts NOTIFY while the row is idle.
  const std::string& channel() const { return channel_; }

 private:
  Connection& connection_;
  std::string prefix_;  // of this store's prepared statement names
  std::string channel_;
};

}  // namespace outboxd::pg
