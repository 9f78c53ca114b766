// The run loop: moves rows and outcomes between its ports and the row book, one fixed list of steps per turn.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/reload.hpp"
#include "daemon/run/backlog_step.hpp"
#include "daemon/run/claim_step.hpp"
#include "daemon/run/decision_writer.hpp"
#include "daemon/run/lease_keeper.hpp"
#include "daemon/run/ports.hpp"
#include "daemon/run/publish_step.hpp"
#include "daemon/run/reporting.hpp"
#include "daemon/run/run_loop_metrics.hpp"
#include "dispatch/loop_timers.hpp"
#include "dispatch/planner.hpp"
#include "dispatch/row_book.hpp"
#include "metrics/registry.hpp"

namespace outboxd::daemon {

// The planner's policy from the dispatch and destinations sections, at start and after a reload.
dispatch::PlannerPolicy planner_policy(const config::DispatchConfig& section,
                                       const std::vector<config::DestinationEntry>& destinations);

class RunLoop {
 public:
  // alone: the daemon's one outbox. tenant: one outbox of many, served while
  // it has rows (daemon/tenants): the supervisor owns the HTTP server, the
  // service manager, signals and reloads, and ends the loop with request_stop().
  enum class Role { alone, tenant };

  // The loop owns the running configuration: a reload (SIGHUP) changes
  // the parts that can change at run time; its other parts stay as started.
  // The ports must outlive the loop.
  RunLoop(config::Config config, std::string instance_id, Ports ports, Role role = Role::alone);

  // Runs until SIGTERM/SIGINT (exit 0) or a fatal error (non-zero; 78 for a
  // missing privilege, a configuration error that systemd does not restart):
  // start(), iterate() while it returns true, finish().
  int run();

  // The three parts of run(), apart for the unit tests. start() returns an
  // exit code when the loop cannot start; iterate() is one turn of the loop
  // (its last step sleeps) and returns false once the loop is to end. With
  // `return_if_quiescent` a turn that leaves it quiescent returns before the
  // sleep: a caller waiting to let it go learns so at once, not at the next wake.
  std::optional<int> start();
  bool iterate(bool return_if_quiescent = false);
  int finish();

  const RunLoopMetrics& metrics() const { return metrics_; }
  const DecisionWriter::Totals& totals() const { return decisions_.totals(); }
  // Rows waiting at its last backlog measurement (with http.listen); none before the first.
  std::optional<std::int64_t> backlog_rows() const { return backlog_.rows(); }

  // As SIGTERM: no more claims, in-flight outcomes awaited up to
  // dispatch.shutdown_timeout_ms, leases handed back by finish().
  void request_stop();
  // The next turn claims even if nothing woke it: what committed before now is seen.
  void claim_again();
  // Nothing held, in flight or unwritten, and writers NOTIFY it with no
  // transaction left that may have missed the arming: what it serves is
  // idle, and a watcher can take over.
  bool quiescent() const;

 private:
  // The steps of a turn that are the loop's own; the others belong to its parts.
  void handle_signals();
  void begin_stop();
  void reload();
  void apply_reload(config::ReloadPlan plan);
  core::Status keep_database();
  void persist_decisions();
  void keep_leases();
  void purge_finished();
  void sleep_until_next_event();

  // Parts of those steps.
  void hand_back_drained();
  bool finished_stopping() const;
  void fail_database(const core::Error& error);
  void stop_for(const core::Error& error);
  void follow_timers();

  config::Config config_;
  std::string instance_id_;
  Role role_;
  metrics::Registry registry_;
  RunLoopMetrics metrics_;
  Ports ports_;
  dispatch::RowBook book_;  // the rows held, the claim pass and the planner
  LeaseKeeper leases_;
  dispatch::LoopTimers timers_;  // every deadline that ends a sleep
  DecisionWriter decisions_;     // outcomes in, marks and failures out, retention's purge
  ClaimStep claims_;             // the claim, NOTIFY or polling, the wait for the standby
  PublishStep publisher_;        // rows out to the broker, its news in
  BacklogStep backlog_;          // the backlog figures of /metrics
  Reporting reporting_;          // health, /metrics, the service manager, the stats line
  bool stopping_ = false;
  std::optional<int> exit_code_;
};

}  // namespace outboxd::daemon
