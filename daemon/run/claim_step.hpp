// The run loop's claim side: when a claim may find rows (NOTIFY or polling), the claim, the wait for the standby.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "config/config.hpp"
#include "core/clock.hpp"
#include "core/result.hpp"
#include "daemon/run/lease_keeper.hpp"
#include "daemon/run/ports.hpp"
#include "daemon/run/run_loop_metrics.hpp"
#include "dispatch/late_commit_watch.hpp"
#include "dispatch/loop_timers.hpp"
#include "dispatch/notify_budget.hpp"
#include "dispatch/notify_policy.hpp"
#include "dispatch/row_book.hpp"
#include "dispatch/standby_gate.hpp"

namespace outboxd::daemon {

// Claims rows into the row book: whether a claim is worth its round trip
// now, the claim itself, and with database.wait_for_standby the claim held
// until the standby has flushed past it. Also how the next claim comes
// about: writers' NOTIFY, armed while rows trickle in (the instance row's
// idle flag) with the transactions that may have missed the arming watched,
// or a busy poll while they pour in. A failed statement goes to `fail` (the
// loop's: the connection is dropped) and the step ends there.
class ClaimStep {
 public:
  // Its slice of the config, at start and after a reload.
  struct Settings {
    std::size_t batch = 1000;             // dispatch.batch_size: rows per claim
    std::size_t claim_bytes = 0;          // dispatch.claim_bytes
    std::int64_t max_message = 0;         // config::max_message_bytes
    config::StandbyWait wait_for_standby;  // database.wait_for_standby
  };
  static Settings settings_of(const config::Config& config);
  using Fail = std::function<void(const core::Error&)>;

  // `dispatch` sets the NOTIFY policy and the late-commit watch, which keep their settings until a restart.
  ClaimStep(Settings settings, const config::DispatchConfig& dispatch, std::string instance_id,
            dispatch::RowBook& book, Database& db, const LeaseKeeper& leases, RunLoopMetrics& metrics,
            dispatch::LoopTimers& timers, const core::Clock& clock, Fail fail);
  void set_settings(Settings settings) { settings_ = std::move(settings); }

  // A claim may find rows, and there is room for what it brings.
  bool possible(bool stopping) const;
  // One claim when possible; while a claim waits for the standby, its check instead.
  void claim(bool stopping);

  // Writers NOTIFY this instance (armed) or not; arming starts the watch of
  // the transactions open at that moment.
  void arm_notify(bool armed);
  bool notify_armed() const { return notify_armed_; }
  // Armed and no claim waiting for the standby. Transactions that may have
  // missed the arming do not count: one held open for hours would keep the
  // outbox from ever being let go; after it, the watcher's checks count rows
  // by state, late commits included.
  bool settled() const { return notify_armed_ && !standby_.waiting(); }
  bool busy() const { return notify_policy_.busy(); }
  // A NOTIFY arrived (or one held back is due): the book expects rows now,
  // or once NotifyBudget lets a NOTIFY wake a claim again (the notified timer).
  void on_notified();
  // A watched transaction finished since the arming: the book expects rows.
  void check_late_commits();
  // A new connection: NOTIFY is not armed on it and no transaction is watched.
  void on_reconnect();
  // The late-commit and standby deadlines, copied into the loop's timers.
  void follow_timers();
  const dispatch::StandbyGate& standby() const { return standby_; }

 private:
  void await_standby(dispatch::WaitingClaim claim);
  void check_standby(bool stopping);
  void take_cleared(std::optional<dispatch::StandbyGate::Cleared> cleared);
  void accept(core::ClaimedSets sets, const dispatch::RowBook::ClaimRequest& request, core::SteadyTime started);
  void refresh_statistics();
  void after(const dispatch::RowBook::Claimed& claimed);

  Settings settings_;
  std::string instance_id_;
  dispatch::RowBook& book_;
  Database& db_;
  const LeaseKeeper& leases_;
  RunLoopMetrics& metrics_;
  dispatch::LoopTimers& timers_;
  const core::Clock& clock_;
  Fail fail_;
  bool notify_armed_ = false;                // writers NOTIFY (the instance row is marked idle)
  dispatch::LateCommitWatch late_commits_;   // writers that may have missed the arming
  dispatch::NotifyPolicy notify_policy_;     // NOTIFY while rows trickle in, poll while they pour
  dispatch::NotifyBudget notify_budget_;     // how often a NOTIFY may wake a claim
  bool notified_claim_ = false;              // the next claim was woken by a NOTIFY
  dispatch::StandbyGate standby_;            // database.wait_for_standby: the claim waiting for the standby
};

}  // namespace outboxd::daemon
