// The backlog the console has counted over the last hour, as chart series; no I/O, the caller supplies time.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "console/chart.hpp"

namespace outboxd::console {

struct BacklogCounts {
  std::int64_t waiting = 0;    // pending and due, or backing off after a failure (due + retrying)
  std::int64_t scheduled = 0;  // pending with due_at ahead
  std::int64_t parked = 0;
};

struct Sample {
  double at = 0;  // seconds on the caller's monotonic clock
  BacklogCounts total;
  std::map<std::string, BacklogCounts> destinations;  // at most kMaxSampledDestinations, by name
  // Rows ever inserted into the outbox table (the statistics' counter);
  // nullopt when it could not be read.
  std::optional<std::int64_t> inserted;
};

inline constexpr std::size_t kMaxSampledDestinations = 50;

class SampleHistory {
 public:
  explicit SampleHistory(double window_seconds = 3600) : window_(window_seconds) {}

  // Samples older than the window before this one's time are dropped.
  void add(Sample sample);
  double window() const { return window_; }
  std::size_t size() const { return samples_.size(); }

  // Waiting and parked rows in all, at each sample.
  std::vector<Series> backlog(double now) const;
  // Waiting rows of one destination (no points for one never sampled).
  Series destination_backlog(const std::string& destination, double now) const;
  // Rows per second that left the backlog (dispatched, skipped or cancelled)
  // between two samples: the rows inserted meanwhile minus the growth of the
  // backlog. No point across a sample without the counter or a counter that
  // went back (statistics reset); never below 0.
  Series departures(double now) const;

 private:
  double window_;
  std::deque<Sample> samples_;  // oldest first
};

}  // namespace outboxd::console
