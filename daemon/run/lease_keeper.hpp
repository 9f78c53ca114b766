// Lease renewal against the database, and the partitions and fence it yields (dispatch::LeaseBook).
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/clock.hpp"
#include "core/result.hpp"
#include "dispatch/lease_book.hpp"
#include "daemon/run/ports.hpp"

namespace outboxd::daemon {

class LeaseKeeper {
 public:
  LeaseKeeper(const config::LeaseConfig& config, std::string instance_id, const core::Clock& clock);

  // Balances when due. Partitions no longer to be claimed (lost, or leased
  // over the fair share and now draining) are appended to `stopped` so the
  // caller can drop their buffered rows; partitions newly claimable to `gained`.
  core::Status maintain(LeaseStore& store, std::vector<int>& stopped, std::vector<int>& gained);

  // False once the leases could have expired in the database: measured from
  // the start of the last successful renewal, minus the safety margin.
  bool may_publish() const { return book_.may_publish(clock_.now()); }
  // Partitions to claim rows from: leased and within the share.
  const std::vector<int>& partitions() const { return book_.partitions(); }
  // Leased over the share: no new rows; hand it back once none is in flight.
  const std::vector<int>& draining() const { return book_.draining(); }
  core::Status hand_back_drained(LeaseStore& store, const std::vector<int>& drained);
  core::SteadyTime next_renewal() const { return book_.next_renewal(); }
  core::SteadyTime valid_until() const { return book_.valid_until(); }
  core::Status hand_back_all(LeaseStore& store);
  void force_renewal() { book_.force_renewal(clock_.now()); }

 private:
  const config::LeaseConfig& config_;
  std::string instance_id_;
  const core::Clock& clock_;
  dispatch::LeaseBook book_;
};

}  // namespace outboxd::daemon
