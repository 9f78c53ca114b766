// What the run loop tells the world: /metrics, /healthz and /readyz, the service manager, the stats line.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "core/clock.hpp"
#include "daemon/run/claim_step.hpp"
#include "daemon/run/decision_writer.hpp"
#include "daemon/run/lease_keeper.hpp"
#include "daemon/run/ports.hpp"
#include "daemon/run/publish_step.hpp"
#include "daemon/run/run_loop_metrics.hpp"
#include "daemon/run/service_manager.hpp"
#include "dispatch/loop_timers.hpp"
#include "dispatch/row_book.hpp"
#include "http/http_server.hpp"
#include "metrics/health.hpp"
#include "metrics/registry.hpp"

namespace outboxd::daemon {

// Reads the loop's parts and reports their state: the health the HTTP
// server's threads answer /healthz and /readyz from, the gauges of
// /metrics, READY=1 once rows can flow, a STATUS= line per change of phase,
// the watchdog's pings, and every dispatch.stats_interval_ms a log line of
// what moved (its timer is the loop's stats timer).
class Reporting {
 public:
  // Its slice of the config, at start and after a reload.
  struct Settings {
    std::string listen;                          // http.listen; empty: no HTTP server
    std::chrono::milliseconds poll_interval{};   // dispatch.poll_interval_ms: the longest quiet sleep
    std::chrono::milliseconds stats_interval{};  // dispatch.stats_interval_ms; 0: no stats line
    bool service_manager = true;  // false for one outbox of many: the supervisor speaks to systemd
    // Rows a crash may make this instance publish again: in_flight + 2 * batch_size.
    std::int64_t redelivery_window = 0;
    bool broker_dedup = false;  // the profile stamps a duplicate-detection id (artemis)
  };
  static Settings settings_of(const config::Config& config);

  // The parts it reads must outlive it.
  struct Parts {
    const dispatch::RowBook& book;
    const Database& db;
    const LeaseKeeper& leases;
    const PublishStep& publisher;
    const ClaimStep& claims;
    const DecisionWriter& decisions;
  };

  Reporting(Settings settings, metrics::Registry& registry, Parts parts, RunLoopMetrics& metrics,
            dispatch::LoopTimers& timers, const core::Clock& clock);
  // A new stats interval takes effect at once; the HTTP server keeps its address until a restart.
  void set_settings(Settings settings);

  // Serves /metrics, /healthz and /readyz when http.listen is set; false (logged) when it cannot listen.
  bool start();
  void stop();

  // Once per turn: READY=1 once the database and the broker are both up
  // (once; reconnects later are no news to the service manager), the
  // STATUS= line when the phase changed, the watchdog, health and gauges.
  void report(bool stopping);
  // The stats line when due, and the STATUS= line refreshed with it.
  void log_stats(bool stopping);
  // The loop stops: /readyz says so, then STOPPING=1 and the status line.
  void stopping();
  // Around a reload: RELOADING=1 and READY=1 again, once start-up was announced.
  void reloading();
  void reloaded();
  std::optional<core::SteadyTime> next_ping() const { return service_.next_ping(); }

 private:
  void status(bool stopping, bool refresh);
  void update_health();
  void update_destinations();
  void schedule_stats(core::SteadyTime now);

  Settings settings_;
  metrics::Registry& registry_;
  Parts parts_;
  RunLoopMetrics& metrics_;
  bool destination_series_ = false;  // update_destinations() published some: clear them when none are left
  dispatch::LoopTimers& timers_;
  const core::Clock& clock_;
  metrics::Health health_;
  std::unique_ptr<metrics::HttpServer> http_;
  ServiceManager service_;
  bool announced_ready_ = false;
  DecisionWriter::Totals last_stats_;  // the totals at the last stats line
};

}  // namespace outboxd::daemon
