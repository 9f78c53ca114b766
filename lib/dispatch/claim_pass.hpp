// The claim's walk over immediate rows in passes: where the next claim starts, and whose rows wait for the next pass.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/outbox_message.hpp"

namespace outboxd::dispatch {

// Immediate rows are claimed in id order, each claim from just above the
// last id of the one before (the cursor), so a backlog is read once per pass.
// A claim that comes back short ends the pass: the next starts from the
// lowest pending id again, and finds the rows whose transactions committed
// late with ids below the cursor. A row the pass moved past because an
// earlier timeout of its session is due stops its session's later rows
// until the pass ends, or they would overtake it once the timeout is marked;
// a session being its writer's (core::order_key), as in the claim's SQL.
class ClaimPass {
 public:
  core::RowId cursor() const { return cursor_; }

  // After a claim: `full` when its immediate batch hit the limit, `last_id`
  // that batch's last id.
  void on_claim(bool full, core::RowId last_id);
  // While the pass reads a backlog (its last claim was full), each claim also
  // reads the first rows of every other destination, visiting them in name
  // order round the claims: the backlog's destinations, and where the next
  // claim by destination starts.
  bool in_backlog() const { return cursor_ != 0; }
  const std::vector<std::string>& backlog_destinations() const { return backlog_destinations_; }
  const std::string& lanes_after() const { return lanes_after_; }
  void on_lanes(std::vector<std::string> backlog_destinations, std::optional<std::string> lanes_after);
  // The claim moved past this row of order scope `order` (behind a due timeout).
  void pass_over(core::RowId id, const std::string& order);
  // A claimed row waits for the next pass: a lower row of its order scope (core::order_key) was passed over.
  bool waits(const core::OutboxMessage& row) const;
  bool passed_over_any() const { return !passed_over_.empty(); }
  // From the lowest id again (new partitions, a new connection, a timeout marked).
  void restart();
  // How many times the pass started over: a claim kept from on_claim
  // (see StandbyGate) is out of date once this changed.
  std::uint64_t restarts() const { return restarts_; }

 private:
  core::RowId cursor_ = 0;
  std::uint64_t restarts_ = 0;
  std::unordered_map<std::string, core::RowId> passed_over_;  // order key: lowest id passed over
  std::vector<std::string> backlog_destinations_;
  std::string lanes_after_;
};

}  // namespace outboxd::dispatch
