// What runs on a worker: serving one outbox until it is idle, checking dormant ones, opening a listener.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "amqp/publisher.hpp"
#include "config/config.hpp"
#include "config/outboxes.hpp"
#include "daemon/run/decision_writer.hpp"
#include "daemon/run/event_loop.hpp"
#include "daemon/tenants/outcome_router.hpp"
#include "dispatch/tenant_schedule.hpp"
#include "pg/connection.hpp"
#include "pg/watch_store.hpp"

namespace outboxd::daemon::tenants {

using OutboxId = dispatch::TenantSchedule::Id;
using Baseline = dispatch::TenantSchedule::Baseline;

// The supervisor's orders to one serve job, read by its thread at every turn.
struct JobControl {
  std::atomic<bool> yield{false};      // others wait: stop, rows may be left
  std::atomic<bool> shutdown{false};   // the daemon stops
  std::atomic<bool> releasing{false};  // set by the job: it began to let the outbox go
  std::atomic<std::int64_t> backlog{-1};  // set by the job: its loop's last backlog measurement; -1 none yet
  EventFd wake;                        // the job's sleep ends when an order comes (and on outcomes)
};

// A job's report, posted to the supervisor when it ends.
struct JobReport {
  enum class Kind { serve, check, listen, catalog };
  enum class End { released, yielded, failed, stopped, elsewhere };
  struct Checked {
    OutboxId id = 0;
    std::optional<Baseline> baseline;  // none: the check failed (error says why)
    std::string error;
  };
  Kind kind = Kind::serve;
  OutboxId id = 0;                       // serve
  End end = End::released;               // serve
  Baseline baseline;                     // serve, released or elsewhere
  bool watched = false;                  // serve, released: its watch row was registered as it let go
  std::string error;                     // serve failed, listen failed
  bool at_look = false;                  // serve could not connect for its look: as a check fails
  DecisionWriter::Totals totals;         // serve: what it moved
  std::vector<Checked> checked;          // check
  std::size_t database = 0;              // listen
  std::optional<pg::Connection> listener;  // listen: the connection, LISTENing on every channel asked
  std::optional<config::OutboxSet> outboxes;  // catalog: the list and the catalog's rows; none: unread (error)
};

// Reports from the workers to the supervisor's thread.
class Mailbox {
 public:
  void post(JobReport report);
  std::vector<JobReport> take();
  int fd() const { return wake_.fd(); }
  void clear() { wake_.clear(); }

 private:
  std::mutex mutex_;
  std::vector<JobReport> reports_;  // guarded by mutex_
  EventFd wake_;
};

// What every job of this daemon shares.
struct JobContext {
  std::string instance_id;
  std::string watcher_id;  // the instances row that asks writers to NOTIFY a dormant outbox
  amqp::Publisher& publisher;
  OutcomeRouter& router;
  Mailbox& mailbox;
  const std::atomic<bool>& contended;  // something waits for a worker: quiescent outboxes let go at once
};

struct ServeOrder {
  OutboxId id = 0;
  std::string name;
  config::Config config;  // one outbox's: its database and outbox sections
  std::uint32_t route = 0;
  bool listened = false;  // its database has a listener: register the watch row as it lets go
  std::chrono::milliseconds release_after{};
  std::uint64_t join_backlog = 0;  // TenantPolicy's: from this many ready rows, joins another instance
  std::shared_ptr<JobControl> control;
};
// Looks first: an outbox another live instance serves, with fewer than
// join_backlog rows ready, is left to it (End::elsewhere), before this
// daemon registers an instance there. Otherwise runs a run loop for the
// outbox, on that same connection, until it is quiescent for release_after
// (at once when contended), yields, fails or the daemon stops; then measures
// the baseline the watcher compares with.
void serve(const JobContext& context, ServeOrder order);

enum class WatchAction { none, watch, unwatch };
struct CheckItem {
  OutboxId id = 0;
  std::string schema;
  WatchAction action = WatchAction::none;
};
// Checks dormant outboxes of one database on one connection.
void check(const JobContext& context, config::DatabaseConfig database, std::vector<CheckItem> items);

// Opens a connection LISTENing on the channels of one database's outboxes.
void listen(const JobContext& context, std::size_t database_index, config::DatabaseConfig database,
            std::vector<std::string> channels);

// Reads tenants.catalog's query: the outboxes to serve, the list's first.
void read_catalog(const JobContext& context, config::Config config);

// The baseline of one check: the signature, the ready or due rows, whether another instance serves it.
Baseline baseline_of(pg::WatchCheck seen);

}  // namespace outboxd::daemon::tenants
