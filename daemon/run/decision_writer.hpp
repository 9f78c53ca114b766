// The run loop's mark side: broker outcomes into the row book, its decisions into the database, retention's purge.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "amqp/outcome.hpp"
#include "config/config.hpp"
#include "core/clock.hpp"
#include "core/result.hpp"
#include "daemon/run/ports.hpp"
#include "daemon/run/run_loop_metrics.hpp"
#include "dispatch/loop_timers.hpp"
#include "dispatch/row_book.hpp"

namespace outboxd::daemon {

// What the broker said about each row reaches the book here; what the book
// decided (accepted rows to mark, failures to back off or park) goes to the
// database in batches: a batch waits at most kMarkDelay, or goes at once
// when full (the dispatch.batch_size decisions) or when the loop stops. A
// statement that fails returns its error and leaves the decisions to the
// next try, the book unchanged. Its timers are the loop's (mark, purge).
class DecisionWriter {
 public:
  // Accepted rows are marked in batches; a batch waits at most this long.
  static constexpr std::chrono::milliseconds kMarkDelay{5};

  // Its slice of the config, at start and after a reload.
  struct Settings {
    std::size_t batch = 1000;  // dispatch.batch_size
    config::RetentionConfig retention;
  };
  static Settings settings_of(const config::Config& config);

  struct Totals {
    std::uint64_t dispatched = 0, parked = 0, retried = 0;
  };

  DecisionWriter(Settings settings, std::string instance_id, dispatch::RowBook& book, Database& db,
                 RunLoopMetrics& metrics, dispatch::LoopTimers& timers, const core::Clock& clock);
  void set_settings(Settings settings) { settings_ = std::move(settings); }

  // The outcomes applied to the book, each counted once (a stale one, for a
  // row no longer in flight, not at all); the decisions they made are due
  // within kMarkDelay.
  void apply(const std::vector<amqp::Outcome>& outcomes);
  // Decisions the book made outside apply() (rows a claim found unsendable,
  // parked as they were handed out) are due within kMarkDelay too.
  void expect_decisions();
  // The decisions written when due (`stopping`: at once). The marks change
  // only rows of partitions this instance still leases: what they left
  // alone is the next owner's, counted and logged, not dispatched.
  core::Status persist(bool stopping);
  // Dispatched (retention keep_for), cancelled and parked rows past their
  // time, a batch each, when the purge timer is due; again within 100 ms
  // while a batch comes back full.
  core::Status purge();

  const Totals& totals() const { return totals_; }

 private:
  struct Written {
    std::size_t marked = 0;     // rows the marks changed
    std::size_t unchanged = 0;  // marks and failures the statements left alone
  };
  bool due(bool stopping) const;
  core::Result<Written> write();
  void count_outcomes(const dispatch::Planner::Counters& before, const dispatch::Planner::Counters& after);
  void count_failure(const dispatch::FailureWrite& failure);

  Settings settings_;
  std::string instance_id_;
  dispatch::RowBook& book_;
  Database& db_;
  RunLoopMetrics& metrics_;
  dispatch::LoopTimers& timers_;
  const core::Clock& clock_;
  Totals totals_;
};

}  // namespace outboxd::daemon
