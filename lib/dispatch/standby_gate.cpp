// Keeps a claim waiting until a standby has flushed the WAL of its rows' commits: when to look again, when to let it through.
#include "dispatch/standby_gate.hpp"

#include <algorithm>
#include <utility>

namespace outboxd::dispatch {

std::size_t WaitingClaim::rows() const {
  return sets.immediate.rows.size() + sets.scheduled.rows.size() + sets.lanes.rows.size();
}

bool WaitingClaim::current(std::uint64_t pass_now, const std::vector<int>& partitions_now) const {
  return pass == pass_now && partitions == partitions_now;
}

StandbyGate::StandbyGate(Settings settings) : settings_(settings) {}

std::optional<StandbyGate::Cleared> StandbyGate::wait(WaitingClaim claim, std::int64_t wal,
                                                      std::optional<std::int64_t> flushed, core::SteadyTime now) {
  waiting_ = std::move(claim);
  target_ = wal;
  waiting_since_ = now;
  warned_ = false;
  interval_ = settings_.first_check;
  return on_flushed(flushed, now);
}

std::optional<StandbyGate::Cleared> StandbyGate::on_flushed(std::optional<std::int64_t> flushed,
                                                            core::SteadyTime now) {
  if (!waiting_) return std::nullopt;
  flushed_ = flushed;
  if (flushed && *flushed >= target_) return clear(now);
  schedule(now);
  return std::nullopt;
}

std::optional<StandbyGate::Cleared> StandbyGate::clear(core::SteadyTime now) {
  if (!waiting_) return std::nullopt;
  Cleared cleared{std::move(*waiting_), now - waiting_since_, warned_};
  waiting_.reset();
  return cleared;
}

void StandbyGate::drop() { waiting_.reset(); }

void StandbyGate::schedule(core::SteadyTime now) {
  next_check_ = now + interval_;
  interval_ = std::min(interval_ * 2, settings_.longest_check);
}

std::optional<core::SteadyTime> StandbyGate::next_check() const {
  if (!waiting_) return std::nullopt;
  return next_check_;
}

std::optional<StandbyGate::Overdue> StandbyGate::overdue(core::SteadyTime now) {
  if (!waiting_ || warned_ || now - waiting_since_ < settings_.warn_after) return std::nullopt;
  warned_ = true;
  Overdue late{now - waiting_since_, waiting_->rows(), std::nullopt};
  if (flushed_) late.lag_bytes = target_ - *flushed_;
  return late;
}

}  // namespace outboxd::dispatch
