// Which partitions this instance may publish, and until when (fencing by own clock).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/clock.hpp"
#include "core/result.hpp"
#include "pg/lease_store.hpp"

namespace outboxd::daemon {

class LeaseKeeper {
 public:
  LeaseKeeper(const config::LeaseConfig& config, std::string instance_id, const core::Clock& clock);

  // Acquires or renews when due. Partitions no longer held are appended to
  // `lost` so the caller can drop their buffered rows.
  core::Status maintain(pg::LeaseStore& store, std::vector<int>& lost);

  // False once the leases could have expired in the database: measured from
  // the start of the last successful renewal, minus the safety margin.
  bool may_publish() const;
  const std::vector<int>& partitions() const { return partitions_; }
  core::SteadyTime next_renewal() const { return renew_at_; }
  core::SteadyTime valid_until() const { return valid_until_; }
  core::Status release(pg::LeaseStore& store);
  void force_renewal() { renew_at_ = clock_.now(); }

 private:
  const config::LeaseConfig& config_;
  std::string instance_id_;
  const core::Clock& clock_;
  std::vector<int> partitions_;
  core::SteadyTime renew_at_{};
  core::SteadyTime valid_until_{};
};

}  // namespace outboxd::daemon
