// The backlog gauge sets: rows per destination and state, the oldest due row's age, the next scheduled row.
#include "daemon/run/backlog_metrics.hpp"

#include <algorithm>
#include <utility>

#include "daemon/run/backlog_ranking.hpp"

namespace outboxd::daemon {

namespace {

const std::string kRowsHelp = "Rows of the partitions this instance leases, per destination and state (due, "
                              "scheduled, retrying, parked); each count stops at " +
                              std::to_string(BacklogMetrics::kCountCap) + "; at most " +
                              std::to_string(BacklogMetrics::kMaxDestinations) +
                              " destinations, those owing the most rows (due, retrying, parked) when last ranked "
                              "(every " + std::to_string(BacklogRanking::kPeriod.count()) + " s)";

metrics::Labels of(const std::string& destination) { return {{"destination", destination}}; }

metrics::Labels of(const std::string& destination, const char* state) {
  return {{"destination", destination}, {"state", state}};
}

}  // namespace

std::vector<pg::DestinationBacklog> with_drained(const std::vector<pg::DestinationBacklog>& measured,
                                                 const std::vector<std::string>& shown_before, std::size_t max) {
  std::vector<pg::DestinationBacklog> out(measured.begin(), measured.begin() + std::min(max, measured.size()));
  for (const auto& name : shown_before) {
    if (out.size() >= max) break;
    const bool present = std::any_of(out.begin(), out.end(), [&](const auto& d) { return d.destination == name; });
    if (present) continue;
    pg::DestinationBacklog drained;
    drained.destination = name;
    out.push_back(std::move(drained));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.destination < b.destination; });
  return out;
}

BacklogMetrics::BacklogMetrics(metrics::Registry& r)
    : duration(r.histogram("outboxd_backlog_query_duration_seconds", "Time of one backlog measurement")),
      rows_(r.gauge_set("outboxd_backlog_rows", kRowsHelp)),
      oldest_due_age_(r.gauge_set("outboxd_backlog_oldest_due_age_seconds",
                                  "Seconds since the oldest due row not yet failed fell due (due_at, database "
                                  "clock), per destination; 0 when none is due")),
      next_due_(r.gauge_set("outboxd_backlog_next_due_seconds",
                            "Seconds until the next scheduled row falls due, per destination; absent when none is "
                            "scheduled")),
      left_out_(r.gauge("outboxd_backlog_destinations_truncated",
                        "Destinations with rows that the backlog series leave out, counted when last ranked; 0 "
                        "as soon as every one has series")) {}

void BacklogMetrics::publish(const pg::BacklogReport& report) {
  const auto shown = with_drained(report.destinations, shown_, static_cast<std::size_t>(kMaxDestinations));
  std::vector<metrics::GaugeSet::Sample> rows, ages, next;
  shown_.clear();
  for (const auto& d : shown) {
    rows.emplace_back(of(d.destination, "due"), static_cast<double>(d.due));
    rows.emplace_back(of(d.destination, "scheduled"), static_cast<double>(d.scheduled));
    rows.emplace_back(of(d.destination, "retrying"), static_cast<double>(d.retrying));
    rows.emplace_back(of(d.destination, "parked"), static_cast<double>(d.parked));
    ages.emplace_back(of(d.destination), d.oldest_due_age);
    if (d.next_due_in) next.emplace_back(of(d.destination), *d.next_due_in);
    shown_.push_back(d.destination);
  }
  rows_.replace(std::move(rows));
  oldest_due_age_.replace(std::move(ages));
  next_due_.replace(std::move(next));
  left_out_.set(report.left_out);
}

void BacklogMetrics::clear() {
  shown_.clear();
  publish({});
}

}  // namespace outboxd::daemon
