// The claim's walk over immediate rows in passes: where the next claim starts, and whose rows wait for the next pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/outbox_message.hpp"
#include "core/session_stops.hpp"

namespace outboxd::dispatch {

// Immediate rows are claimed in id order, each claim from just above the
// last id of the one before (the cursor), so a backlog is read once per pass.
// A claim that comes back short ends the pass: the next starts from the
// lowest pending id again, and finds the rows whose transactions committed
// late with ids below the cursor. A row the pass moved past because an
// earlier timeout of its session is due stops its session's later rows
// until the pass ends, or they would overtake it once the timeout is marked
// (core::SessionStops).
class ClaimPass {
 public:
  core::RowId cursor() const { return cursor_; }

  // After a claim: `full` when its immediate batch hit the limit, `last_id`
  // that batch's last id, `seen` the snapshot taken before its statements
  // and `late_commits_asked` whether it looked for late commits.
  void on_claim(bool full, core::RowId last_id, std::string seen = {}, bool late_commits_asked = true);
  // The snapshot the next claim checks late commits against: a row below
  // the cursor can have committed late only if its transaction was running
  // at this snapshot and has finished since. It is taken before the pass's
  // first claim, and moves on to each claim's own while no transaction but
  // the daemon's own writes finished in between (nothing below the cursor
  // can be late then); once one did, the pass has none, and every claim
  // looks for late commits until the pass ends, as a row found late stays
  // below the cursor. Empty: look.
  const std::optional<std::string>& horizon() const { return horizon_; }
  // Rows the pass's claims returned so far (StatisticsWatch).
  void count_read(std::size_t rows) { read_ += rows; }
  std::size_t read() const { return read_; }
  // While the pass reads a backlog (its last claim was full), each claim also
  // reads the first rows of every other destination, visiting them in name
  // order round the claims: the backlog's destinations, and where the next
  // claim by destination starts.
  bool in_backlog() const { return cursor_ != 0; }
  const std::vector<std::string>& backlog_destinations() const { return backlog_destinations_; }
  const std::string& lanes_after() const { return lanes_after_; }
  void on_lanes(std::vector<std::string> backlog_destinations, std::optional<std::string> lanes_after);
  // The claim moved past row `id` of `session` (a core::session_key): behind a due timeout or a late commit.
  void pass_over(core::RowId id, const std::string& session) { passed_over_.stop(id, session); }
  // A claimed row waits for the next pass: a lower row of its session was passed over.
  bool waits(const core::OutboxMessage& row) const { return passed_over_.waits(row); }
  bool passed_over_any() const { return !passed_over_.empty(); }
  // From the lowest id again (new partitions, a new connection, a timeout marked).
  void restart();
  // How many times the pass started over: a claim kept from on_claim
  // (see StandbyGate) is out of date once this changed.
  std::uint64_t restarts() const { return restarts_; }

 private:
  core::RowId cursor_ = 0;
  std::uint64_t restarts_ = 0;
  std::optional<std::string> horizon_;
  std::size_t read_ = 0;
  core::SessionStops passed_over_;
  std::vector<std::string> backlog_destinations_;
  std::string lanes_after_;
};

}  // namespace outboxd::dispatch
