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
  // Destinations with rows, at most kMaxSampledDestinations: those owing
  // the most rows (open: waiting, scheduled and parked), ties by name.
  std::map<std::string, BacklogCounts> destinations;
  // Rows ever inserted into the outbox table (the statistics' counter);
  // nullopt when it could not be read.
  std::optional<std::int64_t> inserted;
  std::size_t left_out = 0;  // destinations with rows beyond the bound (set by SampleHistory::add)
};

// Per sample: a writer can name destinations without end, and the charts
// must show the ones that matter, as /metrics does (ranked by backlog).
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
  // Waiting rows of one destination: 0 where a sample that left none out
  // lacks it (it had no rows), no point where one that left some out does.
  Series destination_backlog(const std::string& destination, double now) const;
  // Destinations the latest sample left out.
  std::size_t left_out() const { return samples_.empty() ? 0 : samples_.back().left_out; }
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
