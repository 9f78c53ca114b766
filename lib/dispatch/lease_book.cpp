// Lease book: claimable and draining partitions, and the fencing deadline.
#include "dispatch/lease_book.hpp"

#include <algorithm>
#include <iterator>

namespace outboxd::dispatch {

LeaseBook::LeaseBook(core::Duration lease_ttl, core::Duration renew_interval, core::Duration safety_margin)
    : lease_ttl_(lease_ttl), renew_interval_(renew_interval), safety_margin_(safety_margin) {}

LeaseBook::Changes LeaseBook::renewed(const std::vector<Leased>& leased, core::SteadyTime started) {
  std::vector<int> claimable;
  std::vector<int> draining;
  for (const Leased& lease : leased) {
    const bool was_draining = std::binary_search(draining_.begin(), draining_.end(), lease.partition);
    (lease.over_share || was_draining ? draining : claimable).push_back(lease.partition);
  }
  std::sort(claimable.begin(), claimable.end());
  std::sort(draining.begin(), draining.end());
  Changes changes;
  std::set_difference(partitions_.begin(), partitions_.end(), claimable.begin(), claimable.end(),
                      std::back_inserter(changes.stopped));
  std::set_difference(claimable.begin(), claimable.end(), partitions_.begin(), partitions_.end(),
                      std::back_inserter(changes.gained));
  changes.changed = claimable != partitions_ || draining != draining_;
  partitions_ = std::move(claimable);
  draining_ = std::move(draining);
  valid_until_ = started + lease_ttl_ - safety_margin_;
  renew_at_ = started + renew_interval_;
  return changes;
}

void LeaseBook::handed_back(const std::vector<int>& drained) {
  std::vector<int> still;
  std::set_difference(draining_.begin(), draining_.end(), drained.begin(), drained.end(), std::back_inserter(still));
  draining_ = std::move(still);
}

void LeaseBook::handed_back_all() {
  partitions_.clear();
  draining_.clear();
  valid_until_ = {};
}

// Draining partitions count: their in-flight rows were published under the lease.
bool LeaseBook::may_publish(core::SteadyTime now) const { return holds_any() && now < valid_until_; }

}  // namespace outboxd::dispatch
