// The console's connections with many outboxes: one per database at a time, opened on demand, few kept open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "config/config.hpp"
#include "core/result.hpp"
#include "pg/connection.hpp"

namespace outboxd::daemon {

// How the message of a connection the pool could not make begins.
inline constexpr const char* kCannotConnect = "cannot connect to ";

// Outboxes whose schemas share a database share its connection: a reader
// of a database waits for the one before it. After each use, connections
// beyond `kept_open` that no one is using are closed, the least recently
// used first, so a console of a thousand databases holds a handful.
class DatabasePool {
 public:
  DatabasePool(std::size_t kept_open, std::string application_name);

  // A connection made before (the one-outbox console connects at start, to
  // refuse a database it cannot reach): the first use of `database` takes it.
  void adopt(const config::DatabaseConfig& database, pg::Connection connection);

  // Runs `read` on the connection of `database`, connecting or reconnecting
  // first when it is down. A connection that cannot be made is the result's
  // error, of kind transient, its message starting with kCannotConnect.
  template <class Read>
  auto with(const config::DatabaseConfig& database, Read read) -> decltype(read(std::declval<pg::Connection&>())) {
    const auto slot = slot_of(database);
    std::unique_lock lock(slot->mutex);
    if (auto up = connected(*slot, database); !up) {
      lock.unlock();
      trim();
      return up.error();
    }
    auto result = read(*slot->connection);
    lock.unlock();
    trim();
    return result;
  }

  // Connections open now (those in use included).
  std::size_t open_count();

 private:
  struct Slot {
    std::mutex mutex;  // held while a connection is made or used
    std::optional<pg::Connection> connection;
    std::uint64_t last_used = 0;  // under the pool's mutex_
  };

  std::shared_ptr<Slot> slot_of(const config::DatabaseConfig& database);
  core::Status connected(Slot& slot, const config::DatabaseConfig& database);
  // Closes idle connections, least recently used first, down to kept_open_.
  void trim();

  const std::size_t kept_open_;
  const std::string application_name_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Slot>> slots_;  // by the connection's parameters
  std::uint64_t uses_ = 0;
};

}  // namespace outboxd::daemon
