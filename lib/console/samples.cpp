// Backlog samples kept for an hour and turned into the series of the console's charts.
#include "console/samples.hpp"

#include <algorithm>

namespace outboxd::console {

namespace {

std::int64_t open_rows(const BacklogCounts& counts) { return counts.waiting + counts.scheduled + counts.parked; }

}  // namespace

void SampleHistory::add(Sample sample) {
  while (sample.destinations.size() > kMaxSampledDestinations) sample.destinations.erase(std::prev(sample.destinations.end()));
  const double oldest = sample.at - window_;
  samples_.push_back(std::move(sample));
  while (!samples_.empty() && samples_.front().at < oldest) samples_.pop_front();
}

std::vector<Series> SampleHistory::backlog(double now) const {
  Series waiting{"waiting", "#1f6feb", {}};
  Series parked{"parked", "#cf222e", {}};
  for (const Sample& s : samples_) {
    waiting.points.emplace_back(s.at - now, static_cast<double>(s.total.waiting));
    parked.points.emplace_back(s.at - now, static_cast<double>(s.total.parked));
  }
  return {waiting, parked};
}

Series SampleHistory::destination_backlog(const std::string& destination, double now) const {
  Series series{"waiting", "#1f6feb", {}};
  for (const Sample& s : samples_) {
    const auto found = s.destinations.find(destination);
    series.points.emplace_back(s.at - now, found == s.destinations.end() ? 0.0 : static_cast<double>(found->second.waiting));
  }
  return series;
}

Series SampleHistory::departures(double now) const {
  Series series{"left the backlog /s", "#2da44e", {}};
  for (std::size_t i = 1; i < samples_.size(); ++i) {
    const Sample& before = samples_[i - 1];
    const Sample& after = samples_[i];
    if (!before.inserted || !after.inserted || *after.inserted < *before.inserted || after.at <= before.at) continue;
    const auto inserted = *after.inserted - *before.inserted;
    const auto grown = open_rows(after.total) - open_rows(before.total);
    const double rate = static_cast<double>(std::max<std::int64_t>(0, inserted - grown)) / (after.at - before.at);
    series.points.emplace_back(after.at - now, rate);
  }
  return series;
}

}  // namespace outboxd::console
