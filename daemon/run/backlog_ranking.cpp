// A ranking's choice of destinations, kept for a period: which statement the next backlog measurement runs.
#include "daemon/run/backlog_ranking.hpp"

namespace outboxd::daemon {

bool BacklogRanking::due(core::SteadyTime now) const { return !ranked_at_ || now - *ranked_at_ >= kPeriod; }

pg::BacklogReport BacklogRanking::ranked(pg::BacklogReport report, core::SteadyTime now) {
  forget();
  if (!report.beyond_bound) return report;
  ranked_at_ = now;
  for (const auto& d : report.destinations) chosen_.push_back(d.destination);
  left_out_ = report.left_out;
  return report;
}

pg::BacklogReport BacklogRanking::between(pg::BacklogReport report) {
  if (report.beyond_bound) {
    report.left_out = left_out_;
  } else {
    forget();
  }
  return report;
}

void BacklogRanking::forget() {
  ranked_at_.reset();
  chosen_.clear();
  left_out_ = 0;
}

}  // namespace outboxd::daemon
