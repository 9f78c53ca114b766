// The claim pass: cursor, horizon, and the sessions stopped until the pass ends.
#include "dispatch/claim_pass.hpp"

#include <utility>

namespace outboxd::dispatch {

void ClaimPass::on_claim(bool full, core::RowId last_id, std::string seen, bool late_commits_asked) {
  if (!full) return restart();
  // The first claim of a pass has nothing below its cursor to ask about.
  const bool first = cursor_ == 0;
  cursor_ = last_id;
  if ((first || (horizon_ && !late_commits_asked)) && !seen.empty()) {
    horizon_ = std::move(seen);
  } else {
    horizon_.reset();
  }
}

void ClaimPass::on_lanes(std::vector<std::string> backlog_destinations, std::optional<std::string> lanes_after) {
  backlog_destinations_ = std::move(backlog_destinations);
  lanes_after_ = lanes_after.value_or("");
}

void ClaimPass::restart() {
  ++restarts_;
  cursor_ = 0;
  horizon_.reset();
  read_ = 0;
  passed_over_.clear();
  backlog_destinations_.clear();
  lanes_after_.clear();
}

}  // namespace outboxd::dispatch
