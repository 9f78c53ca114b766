// Backlog samples kept for an hour and turned into the series of the console's charts.
#include "console/samples.hpp"

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace outboxd::console {

namespace {

std::int64_t open_rows(const BacklogCounts& counts) { return counts.waiting + counts.scheduled + counts.parked; }

}  // namespace

void SampleHistory::add(Sample sample) {
  auto& destinations = sample.destinations;
  if (destinations.size() > kMaxSampledDestinations) {
    std::vector<std::pair<std::int64_t, std::string>> ranked;  // open rows, name
    ranked.reserve(destinations.size());
    for (const auto& [name, counts] : destinations) ranked.emplace_back(open_rows(counts), name);
    const auto kept_end = ranked.begin() + static_cast<std::ptrdiff_t>(kMaxSampledDestinations);
    std::nth_element(ranked.begin(), kept_end, ranked.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    for (auto left = kept_end; left != ranked.end(); ++left) destinations.erase(left->second);
    sample.left_out += ranked.size() - kMaxSampledDestinations;
  }
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
    if (found != s.destinations.end()) series.points.emplace_back(s.at - now, static_cast<double>(found->second.waiting));
    else if (s.left_out == 0) series.points.emplace_back(s.at - now, 0.0);
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
