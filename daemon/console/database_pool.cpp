// The console's connections: a slot per database, each connected when first used, the idle ones beyond a cap closed.
#include "daemon/console/database_pool.hpp"

#include <algorithm>
#include <vector>

#include "config/url.hpp"

namespace outboxd::daemon {

namespace {

// What makes two connections the same: where, as whom, with which secret.
std::string key_of(const config::DatabaseConfig& database) {
  return database.url + '\n' + database.password_file + '\n' + database.password + '\n' +
         std::to_string(static_cast<int>(database.pooler));
}

}  // namespace

DatabasePool::DatabasePool(std::size_t kept_open, std::string application_name)
    : kept_open_(std::max<std::size_t>(1, kept_open)), application_name_(std::move(application_name)) {}

void DatabasePool::adopt(const config::DatabaseConfig& database, pg::Connection connection) {
  const auto slot = slot_of(database);
  std::lock_guard lock(slot->mutex);
  slot->connection = std::move(connection);
}

std::shared_ptr<DatabasePool::Slot> DatabasePool::slot_of(const config::DatabaseConfig& database) {
  std::lock_guard lock(mutex_);
  auto& slot = slots_[key_of(database)];
  if (!slot) slot = std::make_shared<Slot>();
  slot->last_used = ++uses_;
  return slot;
}

core::Status DatabasePool::connected(Slot& slot, const config::DatabaseConfig& database) {
  if (slot.connection && slot.connection->ok()) return {};
  if (slot.connection) {
    // A reconnect that fails leaves the statement to fail and say why.
    static_cast<void>(slot.connection->reset());
    return {};
  }
  auto opened = pg::Connection::open(database, application_name_);
  if (!opened) {
    return core::Error{core::ErrorKind::transient,
                       kCannotConnect + config::describe(database.target) + ": " + opened.error().message};
  }
  slot.connection = std::move(opened).value();
  return {};
}

void DatabasePool::trim() {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<std::uint64_t, Slot*>> idle;
  std::size_t open = 0;
  std::vector<std::unique_lock<std::mutex>> held;
  for (auto& [key, slot] : slots_) {
    std::unique_lock slot_lock(slot->mutex, std::try_to_lock);
    if (!slot_lock.owns_lock()) {
      ++open;  // in use, so connected or connecting
      continue;
    }
    if (!slot->connection) continue;
    ++open;
    idle.emplace_back(slot->last_used, slot.get());
    held.push_back(std::move(slot_lock));
  }
  if (open <= kept_open_) return;
  std::sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < idle.size() && open > kept_open_; ++i, --open) idle[i].second->connection.reset();
}

std::size_t DatabasePool::open_count() {
  std::lock_guard lock(mutex_);
  std::size_t open = 0;
  for (auto& [key, slot] : slots_) {
    std::unique_lock slot_lock(slot->mutex, std::try_to_lock);
    if (!slot_lock.owns_lock() || slot->connection) ++open;
  }
  return open;
}

}  // namespace outboxd::daemon
