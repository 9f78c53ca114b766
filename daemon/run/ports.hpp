// What the run loop needs from the world, as small interfaces: the database, the broker, the events it sleeps on.
#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "amqp/outcome.hpp"
#include "config/config.hpp"
#include "core/claimed_sets.hpp"
#include "core/clock.hpp"
#include "core/outbox_message.hpp"
#include "core/result.hpp"
#include "pg/lease_store.hpp"
#include "pg/outbox_store.hpp"

namespace outboxd::daemon {

// The outbox rows: the statements of pg::OutboxStore the loop runs.
class RowStore {
 public:
  virtual ~RowStore() = default;
  virtual core::Result<core::ClaimedSets> claim(const std::vector<int>& partitions, int limit, core::RowId after_id,
                                                std::span<const core::RowId> known,
                                                const core::ClaimBytes& bytes, const core::LaneRequest& lanes,
                                                const std::optional<std::string>& horizon) = 0;
  virtual core::Status refresh_statistics() = 0;
  virtual core::Result<int> mark_dispatched(const std::vector<core::RowId>& ids, config::RetentionMode mode,
                                            std::string_view owner) = 0;
  virtual core::Result<int> record_failures(const std::vector<pg::FailureRecord>& failures,
                                            std::string_view owner) = 0;
  virtual core::Result<int> purge(std::chrono::milliseconds keep_for, int batch) = 0;
  virtual core::Result<pg::BacklogReport> backlog(const std::vector<int>& partitions, int count_cap,
                                                  int max_destinations) = 0;
  virtual core::Result<pg::BacklogReport> backlog_of(const std::vector<int>& partitions, int count_cap,
                                                     int max_destinations,
                                                     const std::vector<std::string>& destinations) = 0;
  virtual core::Result<pg::FailedPurge> purge_failed(std::chrono::milliseconds keep_for, int batch) = 0;
  virtual core::Status arm_notify(std::string_view instance_id, bool armed) = 0;
  virtual core::Result<std::vector<std::string>> open_transactions() = 0;
  virtual core::Result<std::vector<std::string>> still_open(const std::vector<std::string>& transactions) = 0;
  virtual core::Result<pg::StandbyPosition> standby_position(const std::optional<std::string>& standby) = 0;
};

// Partition leases and this instance's registration: the statements of pg::LeaseStore the loop runs.
class LeaseStore {
 public:
  virtual ~LeaseStore() = default;
  virtual core::Result<std::vector<pg::Lease>> balance(std::string_view instance_id,
                                                       std::chrono::milliseconds ttl) = 0;
  virtual core::Status hand_back(std::string_view instance_id, const std::vector<int>& partitions) = 0;
  virtual core::Status hand_back_all(std::string_view instance_id) = 0;
  virtual core::Status deregister(std::string_view instance_id) = 0;
};

// The main thread's database connection: (re)connects with backoff and hears NOTIFY.
// rows() and leases() may be used only while up().
class Database {
 public:
  virtual ~Database() = default;
  // Connects when down and the backoff allows it; a fatal or forbidden error
  // is returned (the daemon exits), transient ones only schedule the next attempt.
  virtual core::Status ensure_connected() = 0;
  virtual void lost(const core::Error& error) = 0;  // a statement failed: down until the next attempt
  // After a statement refused for a missing privilege, before lost(): the GRANT that fixes it.
  virtual std::string privilege_fix() = 0;
  // Whether the fatal error came from PostgreSQL refusing the login itself
  // (credentials, database name, pg_hba.conf, CONNECT): a configuration error.
  virtual bool login_refused() const = 0;
  virtual bool up() const = 0;
  virtual bool just_connected() = 0;  // true once after each successful (re)connect
  virtual std::optional<core::SteadyTime> next_attempt() const = 0;
  virtual bool notifications() const = 0;  // whether NOTIFY can wake the loop at all
  virtual int socket() = 0;                // where NOTIFY arrives; < 0 when down
  virtual bool drain_notifications() = 0;  // true if a NOTIFY arrived
  virtual RowStore& rows() = 0;
  virtual LeaseStore& leases() = 0;
};

// What the publisher's thread reported since the last take().
struct BrokerNews {
  struct ConnectionEvent {
    bool up = false;
    std::string node;  // the broker node, host:port
    std::string reason;
    // Not news: the state of a connection shared with other outboxes, told
    // to a run loop that starts while it is up. Neither logged nor counted.
    bool replay = false;
  };
  std::vector<amqp::Outcome> outcomes;
  std::vector<ConnectionEvent> connection_events;
};

// The AMQP publisher as the loop sees it: rows out, outcomes back (amqp::Publisher's contract).
class Broker {
 public:
  virtual ~Broker() = default;
  virtual core::Status start() = 0;
  virtual void send(std::vector<core::OutboxMessage> rows, core::SteadyTime send_before) = 0;
  virtual BrokerNews take_news() = 0;
  virtual void stop() = 0;
  virtual bool plain_over_cleartext() const = 0;
};

struct Readiness {
  bool news = false;      // another thread has news (outcomes): the eventfd
  bool signal = false;
  bool database = false;  // the database socket is readable
};

// Signals and the one blocking wait of the main thread.
class Events {
 public:
  virtual ~Events() = default;
  virtual std::vector<int> take_signals() = 0;
  // Sleeps until an event or `timeout`; `database_fd` < 0: no socket to watch.
  virtual Readiness wait(int database_fd, std::chrono::milliseconds timeout) = 0;
};

// Everything the loop is given; cmd_run wires the real adapters, the unit tests fakes.
struct Ports {
  Database& database;
  Broker& broker;
  Events& events;
  const core::Clock& clock;
  core::RandomSource& random;
};

}  // namespace outboxd::daemon
