// Partition leases and instance registration in <schema>.leases / <schema>.instances.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "pg/connection.hpp"

namespace outboxd::pg {

struct Lease {
  int partition = 0;
  std::int64_t epoch = 0;               // grows with every change of owner
  std::chrono::milliseconds expires_in{0};  // from the statement's start, database clock
};

// Plain statements in autocommit, no session state (advisory locks, temp
// tables): works behind PgBouncer in transaction mode. This version lets
// one instance take every partition; sharing among instances comes later.
class LeaseStore {
 public:
  LeaseStore(Connection& connection, std::string schema);

  core::Status register_instance(std::string_view instance_id);
  core::Status deregister(std::string_view instance_id);

  // Takes every partition that is free, expired or already ours, for `ttl`
  // from now. The epoch is raised when a partition changes owner (including
  // from nobody). Also refreshes the instance heartbeat. Sorted by partition.
  core::Result<std::vector<Lease>> acquire_all(std::string_view instance_id, std::chrono::milliseconds ttl);
  // Extends only leases still held and unexpired; the ones missing from the
  // result are lost. Also refreshes the instance heartbeat.
  core::Result<std::vector<Lease>> renew(std::string_view instance_id, std::chrono::milliseconds ttl);
  core::Status release_all(std::string_view instance_id);

 private:
  core::Result<std::vector<Lease>> leases(std::string_view statement, std::string_view instance_id,
                                          std::chrono::milliseconds ttl, const char* context);

  Connection& connection_;
  std::string prefix_;
};

}  // namespace outboxd::pg
