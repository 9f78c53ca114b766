// Lease renewal: one balance statement when due, its result booked, changes logged.
#include "daemon/lease_keeper.hpp"

#include <spdlog/spdlog.h>

namespace outboxd::daemon {

LeaseKeeper::LeaseKeeper(const config::LeaseConfig& config, std::string instance_id, const core::Clock& clock)
    : config_(config),
      instance_id_(std::move(instance_id)),
      clock_(clock),
      book_(config.lease_ttl, config.renew_interval, config.safety_margin) {}

core::Status LeaseKeeper::maintain(LeaseStore& store, std::vector<int>& stopped, std::vector<int>& gained) {
  // Read before the statement goes out: the database grants the leases at
  // some moment after it, so counting from here errs on the safe side.
  const auto started = clock_.now();
  if (!book_.renewal_due(started)) return {};
  auto leases = store.balance(instance_id_, config_.lease_ttl);
  if (!leases) return leases.error();
  std::vector<dispatch::LeaseBook::Held> held;
  held.reserve(leases.value().size());
  for (const auto& lease : leases.value()) held.push_back({lease.partition, lease.over_share});
  auto changes = book_.renewed(held, started);
  stopped.insert(stopped.end(), changes.stopped.begin(), changes.stopped.end());
  gained.insert(gained.end(), changes.gained.begin(), changes.gained.end());
  if (changes.changed) {
    const auto claimable = book_.partitions().size();
    spdlog::info("leases: holding {} partition{}, {} more draining before release", claimable,
                 claimable == 1 ? "" : "s", book_.draining().size());
  }
  return {};
}

core::Status LeaseKeeper::release_drained(LeaseStore& store, const std::vector<int>& drained) {
  if (drained.empty()) return {};
  if (auto released = store.release(instance_id_, drained); !released) return released;
  book_.released(drained);
  spdlog::info("leases: released {} drained partition{}", drained.size(), drained.size() == 1 ? "" : "s");
  return {};
}

core::Status LeaseKeeper::release(LeaseStore& store) {
  if (!book_.holds_any()) return {};
  book_.released_all();
  return store.release_all(instance_id_);
}

}  // namespace outboxd::daemon
