// `outboxd run` for many outboxes: one publisher, a fixed budget of connections, a run loop per busy outbox.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "amqp/publisher.hpp"
#include "config/config.hpp"
#include "core/clock.hpp"
#include "daemon/run/event_loop.hpp"
#include "daemon/run/service_manager.hpp"
#include "daemon/tenants/jobs.hpp"
#include "daemon/tenants/outcome_router.hpp"
#include "daemon/tenants/worker_pool.hpp"
#include "dispatch/tenant_schedule.hpp"
#include "http/http_server.hpp"
#include "metrics/health.hpp"
#include "metrics/registry.hpp"
#include "pg/connection.hpp"

namespace outboxd::daemon::tenants {

// The connections, divided: a quarter of tenants.max_connections (at least
// one when there are four) keep a LISTEN each on the databases with the most
// outboxes, one LISTEN per outbox schema; the rest are workers, each running
// one job at a time with one connection: a run loop serving a busy outbox,
// or the checks of a database's dormant outboxes (see TenantSchedule).
struct Budget {
  std::size_t listeners = 0;
  std::size_t workers = 0;
};
Budget budget_of(int max_connections);

// The schedule's policy from the config: tenants.*, the fallback poll, the reconnect backoff.
dispatch::TenantPolicy tenant_policy(const config::Config& config, std::size_t workers);

class Supervisor {
 public:
  Supervisor(config::Config config, std::string instance_id, SignalWatcher& signals);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Until SIGTERM/SIGINT (0) or a fatal error at start (non-zero).
  int run();

 private:
  struct Outbox {
    bool present = false;
    config::OutboxEntry entry;
    config::Config config;  // for_outbox(): what its run loop and checks use
    std::size_t database = 0;
    bool watched = false;   // its watch row is registered, as far as this daemon knows
    std::shared_ptr<JobControl> control;  // while a serve job holds it
    DecisionWriter::Totals totals;
    std::int64_t waiting = 0;  // rows waiting as last seen: its last check, or its loop's backlog measurement
    std::string failure;    // the last failure logged, so a repeated one is not
  };
  struct Database {
    std::string key;        // its url: the outboxes of one url share listener and checks
    config::DatabaseConfig config;
    std::vector<OutboxId> outboxes;
    bool may_listen = true;  // not behind a transaction pooler without listen_url
    bool listening_wanted = false;
    bool opening = false;
    std::optional<pg::Connection> listener;
    std::unordered_map<std::string, OutboxId> channels;
    core::SteadyTime retry_at{};
    int failures = 0;
  };

  std::optional<int> start();
  void turn();
  void finish();
  void unwatch_all();

  // Outboxes and databases (supervisor_outboxes.cpp).
  void adopt(const std::vector<config::OutboxEntry>& entries);
  void add_outbox(const config::OutboxEntry& entry);
  void remove_outbox(OutboxId id);
  std::size_t database_for(const config::Config& single);
  void assign_listeners();
  void reload();

  // Jobs and listeners (supervisor_jobs.cpp).
  void take_reports();
  void apply(JobReport report);
  void apply_serve(const JobReport& report);
  void apply_check(const JobReport& report);
  void apply_listen(JobReport report);
  void apply_catalog(const JobReport& report);
  void read_catalog_when_due();
  void note_failure(OutboxId id, const std::string& why, bool check);
  void note_recovery(OutboxId id);
  void open_listeners();
  void drain_listeners();
  void drop_listener(Database& database, const std::string& why);
  void run_plan();
  void start_serve(OutboxId id);
  void start_check(const std::vector<OutboxId>& ids);
  void set_contended(bool contended);
  std::size_t free_workers() const;
  void sleep();

  // What it tells the world (supervisor_reporting.cpp).
  void report();
  void report_outboxes();
  void log_stats();

  config::Config config_;
  std::string instance_id_;
  SignalWatcher& signals_;
  core::SteadyClock clock_;
  core::FastRandom random_;
  core::FastRandom publisher_random_;
  Budget budget_;
  OutcomeRouter router_;
  amqp::Publisher publisher_;
  Mailbox mailbox_;
  std::atomic<bool> contended_{false};
  JobContext context_;
  dispatch::TenantSchedule schedule_;
  std::vector<Outbox> outboxes_;
  std::unordered_map<std::string, OutboxId> by_name_;
  std::vector<Database> databases_;
  std::unordered_map<std::string, std::size_t> database_index_;
  bool catalog_reading_ = false;
  std::optional<core::SteadyTime> catalog_due_;  // none: no catalog
  std::vector<std::string> catalog_problems_;    // the last ones logged
  std::uint32_t next_route_ = 1;  // 0 is the single outbox's
  std::size_t jobs_ = 0;          // submitted, not reported
  std::unique_ptr<WorkerPool> workers_;
  bool stopping_ = false;
  core::SteadyTime stop_by_{};

  metrics::Registry registry_;
  metrics::GaugeSet& states_;
  metrics::GaugeSet& outbox_states_;
  metrics::GaugeSet& outbox_dispatched_;
  metrics::GaugeSet& outbox_backlog_;
  metrics::Gauge& connections_;
  metrics::Health health_;
  std::unique_ptr<metrics::HttpServer> http_;
  ServiceManager service_;
  bool announced_ready_ = false;
  core::SteadyTime next_stats_{};
  std::uint64_t dispatched_at_last_stats_ = 0;
};

}  // namespace outboxd::daemon::tenants
