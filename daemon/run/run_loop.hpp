// The run loop: moves rows and outcomes between its ports and the row book, one fixed list of steps per turn.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/reload.hpp"
#include "daemon/run/backlog_metrics.hpp"
#include "daemon/run/backlog_ranking.hpp"
#include "daemon/run/claim_step.hpp"
#include "daemon/run/decision_writer.hpp"
#include "core/clock.hpp"
#include "daemon/run/lease_keeper.hpp"
#include "daemon/run/ports.hpp"
#include "daemon/run/run_loop_metrics.hpp"
#include "daemon/run/service_manager.hpp"
#include "dispatch/loop_timers.hpp"
#include "dispatch/planner.hpp"
#include "dispatch/row_book.hpp"
#include "metrics/health.hpp"
#include "http/http_server.hpp"
#include "metrics/registry.hpp"

namespace outboxd::daemon {

// The planner's policy from the dispatch section, at start and after a reload.
dispatch::PlannerPolicy planner_policy(const config::DispatchConfig& section);

class RunLoop {
 public:
  // The loop owns the running configuration: a reload (SIGHUP) changes
  // the parts that can change at run time; its other parts stay as started.
  // The ports must outlive the loop.
  RunLoop(config::Config config, std::string instance_id, Ports ports);

  // Runs until SIGTERM/SIGINT (exit 0) or a fatal error (non-zero; 78 for a
  // missing privilege, a configuration error that systemd does not restart):
  // start(), iterate() while it returns true, finish().
  int run();

  // The three parts of run(), apart for the unit tests. start() returns an
  // exit code when the loop cannot start; iterate() is one turn of the loop
  // (its last step sleeps) and returns false once the loop is to end.
  std::optional<int> start();
  bool iterate();
  int finish();

  const RunLoopMetrics& metrics() const { return metrics_; }

 private:
  // One loop iteration, in order.
  void handle_signals();
  void reload();
  void apply_reload(config::ReloadPlan plan);
  void announce_ready();
  void report_status(bool refresh);
  void schedule_stats(core::SteadyTime now);
  void schedule_backlog(core::SteadyTime now);
  void apply_outcomes();
  core::Status keep_database();
  void persist_decisions();
  void keep_leases();
  void claim_rows();
  void publish_ready();
  void purge_finished();
  void measure_backlog();
  void log_stats();
  void sleep_until_next_event();
  void update_health();

  // Parts of those steps.
  void note_broker_connection(const std::vector<BrokerNews::ConnectionEvent>& events);
  void hand_back_drained();
  bool finished_stopping() const;
  void fail_database(const core::Error& error);
  void stop_for(const core::Error& error);
  void follow_timers();

  config::Config config_;
  std::string instance_id_;
  metrics::Registry registry_;
  metrics::Health health_;
  RunLoopMetrics metrics_;
  BacklogMetrics backlog_;
  BacklogRanking backlog_ranking_;
  std::unique_ptr<metrics::HttpServer> http_;
  Database& db_;
  Broker& broker_;
  Events& events_;
  const core::Clock& clock_;
  core::RandomSource& random_;
  dispatch::RowBook book_;  // the rows held, the claim pass and the planner
  LeaseKeeper leases_;
  ServiceManager service_;
  bool announced_ready_ = false;

  dispatch::LoopTimers timers_;  // every deadline that ends a sleep
  DecisionWriter decisions_;     // outcomes in, marks and failures out, retention's purge
  ClaimStep claims_;             // the claim, NOTIFY or polling, the wait for the standby
  bool broker_up_ = false;
  std::string broker_down_reason_;  // the last failed attempt's, logged at warn once

  bool stopping_ = false;
  std::optional<int> exit_code_;

  DecisionWriter::Totals last_stats_;  // the totals at the last stats line
};

}  // namespace outboxd::daemon
