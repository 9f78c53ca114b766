// Keeps a claim waiting until a standby has flushed the WAL of its rows' commits (database.wait_for_standby).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/claimed_sets.hpp"
#include "core/clock.hpp"
#include "dispatch/row_book.hpp"

namespace outboxd::dispatch {

// A claim as the database returned it, not yet given to the row book.
struct WaitingClaim {
  core::ClaimedSets sets;
  RowBook::ClaimRequest request;
  core::SteadyTime started{};   // when the claim was sent
  std::vector<int> partitions;  // the leases it read
  std::uint64_t pass = 0;       // RowBook::pass_restarts() when it was sent

  std::size_t rows() const;
  // Whether the row book may still take it: a new pass or other leases since
  // it was sent mean that it may skip rows or hand out rows no longer ours; it is
  // then dropped and its rows are claimed again.
  bool current(std::uint64_t pass_now, const std::vector<int>& partitions_now) const;
};

// Every row a claim returns committed before the claim; its commit record
// therefore ends at or before the WAL position read right after the claim.
// Once the standby's flushed position has passed that, the rows survive a
// failover to that standby and may be published.
//
// One claim waits at a time, and no claim is sent while it does: so every row
// the planner holds came from a claim the standby has passed, and rows handed
// out again (retries after an outcome) need no second look. The standby is read
// again after `first_check`, then at doubling intervals up to `longest_check`,
// so that a standby streaming normally costs a few reads of a millisecond
// each, and one that stopped reporting a read per `longest_check`.
class StandbyGate {
 public:
  struct Settings {
    core::Duration first_check;
    core::Duration longest_check;
    core::Duration warn_after;  // a wait this long is worth a warning, once per wait
  };

  explicit StandbyGate(Settings settings);

  // A claim cleared, how long it waited, and whether overdue() reported the wait.
  struct Cleared {
    WaitingClaim claim;
    core::Duration waited{};
    bool reported = false;
  };

  // A claim, the WAL position read after it, and what the standby had
  // flushed then (none: no standby reports). Returns the claim at once when
  // the standby is past it; else keeps it waiting.
  std::optional<Cleared> wait(WaitingClaim claim, std::int64_t wal, std::optional<std::int64_t> flushed,
                              core::SteadyTime now);
  // A later reading of the standby: the claim waiting, once the standby has passed it.
  std::optional<Cleared> on_flushed(std::optional<std::int64_t> flushed, core::SteadyTime now);
  // The claim waiting, at once: waiting for the standby was switched off (a reload).
  std::optional<Cleared> clear(core::SteadyTime now);
  // Forgets the claim waiting (its rows will be claimed again).
  void drop();

  bool waiting() const { return waiting_.has_value(); }
  // Whether the claim waiting may still go to the row book (WaitingClaim::current).
  bool current(std::uint64_t pass_now, const std::vector<int>& partitions_now) const {
    return waiting_ && waiting_->current(pass_now, partitions_now);
  }
  // A wait reported by overdue() and not over yet: an outage of publishing.
  bool stalled() const { return waiting_ && warned_; }
  std::size_t waiting_rows() const { return waiting_ ? waiting_->rows() : 0; }
  // When to read the standby again; none while nothing waits.
  std::optional<core::SteadyTime> next_check() const;
  bool check_due(core::SteadyTime now) const { return waiting_ && now >= next_check_; }

  // A wait that has lasted warn_after, reported once per wait.
  struct Overdue {
    core::Duration waited{};
    std::size_t rows = 0;
    std::optional<std::int64_t> lag_bytes;  // how far the standby is behind the claim; none: no standby reports
  };
  std::optional<Overdue> overdue(core::SteadyTime now);

 private:
  void schedule(core::SteadyTime now);

  Settings settings_;
  std::optional<WaitingClaim> waiting_;
  std::int64_t target_ = 0;
  std::optional<std::int64_t> flushed_;
  core::SteadyTime waiting_since_{};
  core::SteadyTime next_check_{};
  core::Duration interval_{};
  bool warned_ = false;
};

}  // namespace outboxd::dispatch
