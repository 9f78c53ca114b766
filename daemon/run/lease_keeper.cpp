// Lease renewal: one balance statement when due, its result booked, changes logged.
#include "daemon/run/lease_keeper.hpp"

#include <spdlog/spdlog.h>

#include "log/log.hpp"

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
  std::vector<dispatch::LeaseBook::Leased> leased;
  leased.reserve(leases.value().size());
  for (const auto& lease : leases.value()) leased.push_back({lease.partition, lease.over_share});
  auto changes = book_.renewed(leased, started);
  stopped.insert(stopped.end(), changes.stopped.begin(), changes.stopped.end());
  gained.insert(gained.end(), changes.gained.begin(), changes.gained.end());
  if (changes.changed) {
    const auto claimable = book_.partitions().size();
    spdlog::log(log::routine(), "leases: claiming {} partition{}, {} more draining before they are handed back", claimable,
                 claimable == 1 ? "" : "s", book_.draining().size());
  }
  return {};
}

core::Status LeaseKeeper::hand_back_drained(LeaseStore& store, const std::vector<int>& drained) {
  if (drained.empty()) return {};
  if (auto handed = store.hand_back(instance_id_, drained); !handed) return handed;
  book_.handed_back(drained);
  spdlog::log(log::routine(), "leases: handed back {} drained partition{}", drained.size(), drained.size() == 1 ? "" : "s");
  return {};
}

core::Status LeaseKeeper::hand_back_all(LeaseStore& store) {
  if (!book_.holds_any()) return {};
  book_.handed_back_all();
  return store.hand_back_all(instance_id_);
}

}  // namespace outboxd::daemon
