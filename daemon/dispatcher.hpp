// The run loop: claims rows, publishes them, records outcomes, sleeps when idle.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "amqp/publisher.hpp"
#include "config/config.hpp"
#include "config/reload.hpp"
#include "core/clock.hpp"
#include "daemon/database_link.hpp"
#include "daemon/dispatcher_metrics.hpp"
#include "daemon/event_loop.hpp"
#include "daemon/lease_keeper.hpp"
#include "daemon/outcome_queue.hpp"
#include "daemon/service_manager.hpp"
#include "dispatch/claim_pass.hpp"
#include "dispatch/late_commit_watch.hpp"
#include "dispatch/planner.hpp"
#include "dispatch/wakeup_policy.hpp"
#include "metrics/health.hpp"
#include "metrics/http_server.hpp"
#include "metrics/registry.hpp"

namespace outboxd::daemon {

// The planner's policy from the dispatch section, at start and after a reload.
dispatch::PlannerPolicy planner_policy(const config::DispatchConfig& section);

class Dispatcher {
 public:
  // The dispatcher owns the running configuration: a reload (SIGHUP) changes
  // the parts that can change at run time; its other parts stay as started.
  Dispatcher(config::Config config, std::string instance_id, SignalWatcher& signals);

  // Runs until SIGTERM/SIGINT (exit 0) or a fatal error (non-zero; 78 for a
  // missing privilege, a configuration error that systemd does not restart).
  int run();

 private:
  // Accepted rows are marked in batches; a batch waits at most this long.
  static constexpr std::chrono::milliseconds kMarkDelay{5};

  // One loop iteration, in order.
  void handle_signals();
  void reload();
  void apply_reload(config::ReloadPlan plan);
  void announce_ready();
  void report_status(bool refresh);
  void schedule_stats(core::SteadyTime now);
  void apply_outcomes();
  core::Status keep_database();
  void persist_decisions();
  void keep_leases();
  void release_drained();
  void claim_rows();
  void publish_ready();
  void purge_finished();
  void log_stats();
  void sleep_until_next_event();
  void update_health();

  bool finished_stopping() const;
  std::vector<core::RowId> claimable_known_rows() const;
  void observe_delay(metrics::Histogram& histogram, core::RowId id, core::SteadyTime now);
  void fail_database(const core::Error& error);
  void stop_for(const core::Error& error);
  void forget_rows(const std::vector<core::RowId>& ids);
  bool claim_possible() const;
  void arm_wakeup(bool idle);
  void check_late_commits();
  std::chrono::milliseconds sleep_budget();

  config::Config config_;
  std::string instance_id_;
  metrics::Registry registry_;
  metrics::Health health_;
  DispatcherMetrics metrics_;
  std::unique_ptr<metrics::HttpServer> http_;
  core::SteadyClock clock_;
  core::FastRandom random_;
  SignalWatcher& signals_;
  Wakeup wakeup_;
  OutcomeQueue outcomes_;
  dispatch::Planner planner_;
  DatabaseLink db_;
  LeaseKeeper leases_;
  amqp::Publisher publisher_;
  ServiceManager service_;
  bool announced_ready_ = false;

  // Payloads of the rows the planner knows, by id, with the moment each
  // became due on our steady clock (claim time less how long it had been due).
  struct KnownRow {
    core::OutboxMessage message;
    core::SteadyTime due_since;
  };
  std::unordered_map<core::RowId, KnownRow> rows_;

  // Claim bookkeeping: `backlog_` means a claim may find rows; `pass_` is
  // where the current pass over immediate rows stands.
  bool backlog_ = true;
  dispatch::ClaimPass pass_;
  bool idle_ = false;            // marked idle in the database (NOTIFY armed)
  dispatch::LateCommitWatch late_commits_;  // writers that may have missed the arming
  dispatch::WakeupPolicy wakeup_policy_;     // NOTIFY while rows trickle in, poll while they pour
  std::optional<core::SteadyTime> next_busy_claim_;
  bool broker_up_ = false;
  std::optional<core::SteadyTime> next_due_;
  core::SteadyTime next_poll_{};
  core::SteadyTime next_purge_{};
  core::SteadyTime next_stats_{};
  std::optional<core::SteadyTime> writes_since_;  // oldest unpersisted decision

  bool stopping_ = false;
  core::SteadyTime stop_deadline_{};
  std::optional<int> exit_code_;

  struct Totals {
    std::uint64_t dispatched = 0, parked = 0, retried = 0;
  } totals_, last_stats_;
};

}  // namespace outboxd::daemon
