// Which partitions this instance may claim and publish, and until when: the lease fence without I/O.
#pragma once

#include <vector>

#include "core/clock.hpp"

namespace outboxd::dispatch {

// The database grants a lease for lease_ttl from some moment during the
// balance statement; the instance cannot know when, so it counts from the
// moment it sent the statement, on its own monotonic clock, and stops
// publishing safety_margin before that could run out. Partitions leased over
// the fair share are "draining": no new claims, in-flight rows finish, then
// the caller hands them back; once draining, a partition stays so until
// handed back, even if the share grows back (its buffered rows are gone).
class LeaseBook {
 public:
  struct Leased {
    int partition = 0;
    bool over_share = false;
  };
  struct Changes {
    std::vector<int> stopped;  // no longer to be claimed: drop their buffered rows
    std::vector<int> gained;   // newly claimable: their rows may lie below the claim cursor
    bool changed = false;      // claimable or draining sets differ from before
  };

  LeaseBook(core::Duration lease_ttl, core::Duration renew_interval, core::Duration safety_margin);

  bool renewal_due(core::SteadyTime now) const { return now >= renew_at_; }
  void force_renewal(core::SteadyTime now) { renew_at_ = now; }

  // A balance sent at `started` succeeded and the instance now leases `leased`.
  Changes renewed(const std::vector<Leased>& leased, core::SteadyTime started);
  // These draining partitions were handed back.
  void handed_back(const std::vector<int>& drained);
  // Every lease was handed back (shutdown).
  void handed_back_all();

  // False once a lease could have expired in the database, or with none leased.
  bool may_publish(core::SteadyTime now) const;
  const std::vector<int>& partitions() const { return partitions_; }  // sorted
  const std::vector<int>& draining() const { return draining_; }      // sorted
  bool holds_any() const { return !partitions_.empty() || !draining_.empty(); }
  core::SteadyTime next_renewal() const { return renew_at_; }
  core::SteadyTime valid_until() const { return valid_until_; }

 private:
  core::Duration lease_ttl_;
  core::Duration renew_interval_;
  core::Duration safety_margin_;
  std::vector<int> partitions_;
  std::vector<int> draining_;
  core::SteadyTime renew_at_{};
  core::SteadyTime valid_until_{};
};

}  // namespace outboxd::dispatch
