// Lease renewal schedule and the fencing deadline derived from it.
#include "daemon/lease_keeper.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace outboxd::daemon {

LeaseKeeper::LeaseKeeper(const config::LeaseConfig& config, std::string instance_id, const core::Clock& clock)
    : config_(config), instance_id_(std::move(instance_id)), clock_(clock) {}

core::Status LeaseKeeper::maintain(pg::LeaseStore& store, std::vector<int>& lost) {
  const auto started = clock_.now();
  if (started < renew_at_) return {};
  auto held = store.acquire_all(instance_id_, config_.lease_ttl);
  if (!held) return held.error();
  std::vector<int> now_held;
  now_held.reserve(held.value().size());
  for (const auto& lease : held.value()) now_held.push_back(lease.partition);
  std::sort(now_held.begin(), now_held.end());
  std::set_difference(partitions_.begin(), partitions_.end(), now_held.begin(), now_held.end(),
                      std::back_inserter(lost));
  if (now_held != partitions_) {
    spdlog::info("leases: holding {} partition{}", now_held.size(), now_held.size() == 1 ? "" : "s");
  }
  partitions_ = std::move(now_held);
  // The database granted leases valid for lease_ttl from some moment after
  // `started`; counting from `started` errs on the safe side.
  valid_until_ = started + config_.lease_ttl - config_.safety_margin;
  renew_at_ = started + config_.renew_interval;
  return {};
}

bool LeaseKeeper::may_publish() const { return !partitions_.empty() && clock_.now() < valid_until_; }

core::Status LeaseKeeper::release(pg::LeaseStore& store) {
  if (partitions_.empty()) return {};
  partitions_.clear();
  valid_until_ = {};
  return store.release_all(instance_id_);
}

}  // namespace outboxd::daemon
