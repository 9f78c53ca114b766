// Holds a claim until a standby has flushed the WAL of its rows' commits: when to look again, when to let it through.
#include "dispatch/standby_gate.hpp"

#include <algorithm>
#include <utility>

namespace outboxd::dispatch {

std::size_t HeldClaim::rows() const {
  return sets.immediate.rows.size() + sets.scheduled.rows.size() + sets.lanes.rows.size();
}

bool HeldClaim::current(std::uint64_t pass_now, const std::vector<int>& partitions_now) const {
  return pass == pass_now && partitions == partitions_now;
}

StandbyGate::StandbyGate(Settings settings) : settings_(settings) {}

std::optional<StandbyGate::Cleared> StandbyGate::hold(HeldClaim claim, std::int64_t wal,
                                                        std::optional<std::int64_t> flushed, core::SteadyTime now) {
  held_ = std::move(claim);
  target_ = wal;
  held_since_ = now;
  warned_ = false;
  interval_ = settings_.first_check;
  return on_flushed(flushed, now);
}

std::optional<StandbyGate::Cleared> StandbyGate::on_flushed(std::optional<std::int64_t> flushed,
                                                              core::SteadyTime now) {
  if (!held_) return std::nullopt;
  flushed_ = flushed;
  if (flushed && *flushed >= target_) return clear(now);
  schedule(now);
  return std::nullopt;
}

std::optional<StandbyGate::Cleared> StandbyGate::clear(core::SteadyTime now) {
  if (!held_) return std::nullopt;
  Cleared cleared{std::move(*held_), now - held_since_, warned_};
  held_.reset();
  return cleared;
}

void StandbyGate::drop() { held_.reset(); }

void StandbyGate::schedule(core::SteadyTime now) {
  next_check_ = now + interval_;
  interval_ = std::min(interval_ * 2, settings_.longest_check);
}

std::optional<core::SteadyTime> StandbyGate::next_check() const {
  if (!held_) return std::nullopt;
  return next_check_;
}

std::optional<StandbyGate::Overdue> StandbyGate::overdue(core::SteadyTime now) {
  if (!held_ || warned_ || now - held_since_ < settings_.warn_after) return std::nullopt;
  warned_ = true;
  Overdue late{now - held_since_, held_->rows(), std::nullopt};
  if (flushed_) late.lag_bytes = target_ - *flushed_;
  return late;
}

}  // namespace outboxd::dispatch
