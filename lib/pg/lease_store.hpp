// Partition leases and instance registration in <schema>.leases / <schema>.instances.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "pg/connection.hpp"

namespace outboxd::pg {

struct Lease {
  int partition = 0;
  bool over_share = false;  // leased beyond this instance's fair share: drain it, then hand_back()
};

// Plain statements in autocommit, no session state (advisory locks, temp
// tables): works behind PgBouncer in transaction mode. balance() shares the
// partitions fairly among the live instances; row locks keep two instances
// balancing at once from both taking a partition.
class LeaseStore {
 public:
  LeaseStore(Connection& connection, std::string schema);
  // The statements it defines for outbox schema `schema`, by name.
  static NamedStatements statements(const std::string& schema);

  core::Status register_instance(std::string_view instance_id);
  core::Status deregister(std::string_view instance_id);

  // One statement: refreshes the heartbeat, forgets instances silent for
  // kDeadAfterTtls lease times, and with share = ceil(partitions / live
  // instances) renews the unexpired leases it has and takes free or expired
  // ones up to the share, each until `ttl` from now. Leases beyond the
  // share are renewed too but flagged over_share, so that the caller can
  // drain them before hand_back(). Sorted by partition.
  core::Result<std::vector<Lease>> balance(std::string_view instance_id, std::chrono::milliseconds ttl);
  core::Status hand_back(std::string_view instance_id, const std::vector<int>& partitions);
  core::Status hand_back_all(std::string_view instance_id);

  static constexpr int kDeadAfterTtls = 10;

 private:
  Connection& connection_;
  std::string prefix_;
};

}  // namespace outboxd::pg
