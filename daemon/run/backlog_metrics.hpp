// The backlog figures of /metrics: the last measurement of the database, per destination, in a bounded number of series.
#pragma once

#include <string>
#include <vector>

#include "metrics/registry.hpp"
#include "pg/outbox_store.hpp"

namespace outboxd::daemon {

// The destinations to show: those measured, then those shown before and
// drained since (all zero, so a graph ends at 0 rather than in a gap) while
// fewer than `max` are shown; by name.
std::vector<pg::DestinationBacklog> with_drained(const std::vector<pg::DestinationBacklog>& measured,
                                                 const std::vector<std::string>& shown_before, std::size_t max);

class BacklogMetrics {
 public:
  // Each count stops here: the cost of a measurement must not grow with the table.
  static constexpr int kCountCap = 10000;
  // Series per family: beyond it, the destinations owing the fewest rows are
  // left out (lib/pg/outbox_backlog.cpp ranks them, BacklogRanking says
  // when), and counted.
  static constexpr int kMaxDestinations = 20;

  explicit BacklogMetrics(metrics::Registry& registry);

  void publish(const pg::BacklogReport& report);
  void clear();  // measuring is off: no figures rather than old ones

  metrics::Histogram& duration;

 private:
  metrics::GaugeSet& rows_;
  metrics::GaugeSet& oldest_due_age_;
  metrics::GaugeSet& next_due_;
  metrics::Gauge& left_out_;
  std::vector<std::string> shown_;
};

}  // namespace outboxd::daemon
