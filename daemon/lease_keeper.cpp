// Lease renewal schedule and the fencing deadline derived from it.
#include "daemon/lease_keeper.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace outboxd::daemon {

LeaseKeeper::LeaseKeeper(const config::LeaseConfig& config, std::string instance_id, const core::Clock& clock)
    : config_(config), instance_id_(std::move(instance_id)), clock_(clock) {}

core::Status LeaseKeeper::maintain(pg::LeaseStore& store, std::vector<int>& stopped, std::vector<int>& gained) {
  const auto started = clock_.now();
  if (started < renew_at_) return {};
  auto held = store.balance(instance_id_, config_.lease_ttl);
  if (!held) return held.error();
  // Once draining, a partition stays so until released, even if the share
  // grows back meanwhile: its buffered rows are gone already.
  std::vector<int> claimable;
  std::vector<int> draining;
  for (const auto& lease : held.value()) {
    const bool was_draining = std::binary_search(draining_.begin(), draining_.end(), lease.partition);
    (lease.over_share || was_draining ? draining : claimable).push_back(lease.partition);
  }
  std::set_difference(partitions_.begin(), partitions_.end(), claimable.begin(), claimable.end(),
                      std::back_inserter(stopped));
  std::set_difference(claimable.begin(), claimable.end(), partitions_.begin(), partitions_.end(),
                      std::back_inserter(gained));
  if (claimable != partitions_ || draining != draining_) {
    spdlog::info("leases: holding {} partition{}, {} more draining before release", claimable.size(),
                 claimable.size() == 1 ? "" : "s", draining.size());
  }
  partitions_ = std::move(claimable);
  draining_ = std::move(draining);
  // The database granted leases valid for lease_ttl from some moment after
  // `started`; counting from `started` errs on the safe side.
  valid_until_ = started + config_.lease_ttl - config_.safety_margin;
  renew_at_ = started + config_.renew_interval;
  return {};
}

core::Status LeaseKeeper::release_drained(pg::LeaseStore& store, const std::vector<int>& drained) {
  if (drained.empty()) return {};
  if (auto released = store.release(instance_id_, drained); !released) return released;
  std::vector<int> still;
  std::set_difference(draining_.begin(), draining_.end(), drained.begin(), drained.end(), std::back_inserter(still));
  draining_ = std::move(still);
  spdlog::info("leases: released {} drained partition{}", drained.size(), drained.size() == 1 ? "" : "s");
  return {};
}

// Draining partitions count: their in-flight rows were published under the lease.
bool LeaseKeeper::may_publish() const {
  return (!partitions_.empty() || !draining_.empty()) && clock_.now() < valid_until_;
}

core::Status LeaseKeeper::release(pg::LeaseStore& store) {
  if (partitions_.empty() && draining_.empty()) return {};
  partitions_.clear();
  draining_.clear();
  valid_until_ = {};
  return store.release_all(instance_id_);
}

}  // namespace outboxd::daemon
