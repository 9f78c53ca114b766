// Many outboxes, few connections: which outbox a worker serves or checks next, and which served one yields.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "dispatch/backoff.hpp"

namespace outboxd::dispatch {

// A daemon that serves many outboxes has a fixed number of workers, each
// holding at most one database connection. An outbox is served (a run loop
// on a worker) only while it has rows to move; otherwise it is dormant and
// costs one statement now and then:
//
//   unchecked --check--> dormant --NOTIFY, changed signature, due time--> wanted
//   wanted --worker free--> serving --quiescent--> dormant (its baseline measured)
//                             |--yield (others wait, its slice is over)--> wanted
//                             `--database lost--> broken --retry time--> check
//   a check or a serve job's first look finds another live instance serving
//   it and few rows ready --> elsewhere --its lease would expire--> check
//
// A dormant outbox whose database has a listener is woken by NOTIFY and
// checked only as a fallback (listened_check); the others are checked every
// idle_check. A check compares the outbox's signature (what could become
// claimable: ready, due and parked rows) with the baseline its last serve or
// check left, so an outbox whose rows are all blocked is not woken again, and
// schedules the outbox's next due time (a timeout, a backoff) as a wake-up.
//
// Fair share: wanted outboxes and due checks are taken oldest first; when
// none can get a worker, the outboxes served longest (at least one slice) are
// asked to yield, as many as wait.
//
// Several daemons may share the same outboxes: a live lease of another
// instance says it serves the outbox, so this daemon leaves it alone
// (elsewhere: a NOTIFY or a changed signature does not wake it) until that
// lease would expire, then looks again; a dead daemon's outboxes are taken
// over within lease_ttl of its last renewal. An outbox with join_backlog
// ready rows or more is served here too, and its partitions split.
struct TenantPolicy {
  std::size_t workers = 1;
  core::Duration idle_check{std::chrono::seconds(5)};       // tenants.idle_check_interval_ms
  core::Duration listened_check{std::chrono::seconds(30)};  // dispatch.poll_interval_ms: the fallback poll
  core::Duration slice{std::chrono::seconds(2)};            // served this long, an outbox yields to one waiting
  BackoffPolicy retry{std::chrono::milliseconds(100), std::chrono::seconds(10), 2.0, 0.2};  // a broken outbox
  std::size_t check_batch = 500;  // outboxes one check job covers (one database, one connection)
  core::Duration check_gather{std::chrono::seconds(1)};  // a check job takes those of its database due this soon
  core::Duration lease_ttl{std::chrono::seconds(30)};  // leases.lease_ttl_ms: the longest an elsewhere lasts
  std::uint64_t join_backlog = 1000;  // ready rows from which an outbox served elsewhere is served here too
};

class TenantSchedule {
 public:
  using Id = std::size_t;  // the caller's index of the outbox, stable while it is known
  enum class State { unchecked, dormant, wanted, serving, checking, broken, elsewhere };

  TenantSchedule(TenantPolicy policy, const core::Clock& clock, core::RandomSource& random);
  void set_policy(TenantPolicy policy) { policy_ = policy; }
  const TenantPolicy& policy() const { return policy_; }

  // An outbox found in the config or the catalog; `database` groups the
  // outboxes one check job may cover on one connection.
  void add(Id id, std::size_t database);
  // The outbox is gone from the config: forgotten now unless a job holds
  // it, then once that job ends. True if it is being served (stop its job).
  bool remove(Id id);
  bool known(Id id) const;

  // Its database's listener came (NOTIFY wakes it; checked as a fallback) or went.
  void set_listened(Id id, bool listened);
  // A dormant outbox is checked at the next plan (its watch row is missing).
  void check_now(Id id);
  // A NOTIFY on its channel: a dormant outbox is wanted; one being served
  // after it began to release is wanted again when the release ends.
  void on_notified(Id id);
  // The job serving it began to give its worker back (quiescent).
  void on_releasing(Id id);

  // Job results.
  struct Baseline {
    std::string signature;                              // changes when what could be claimed changes
    bool rows_waiting = false;                          // ready or due rows, blocked or not
    std::optional<std::chrono::milliseconds> next_due;  // its next timeout or backoff
    std::uint64_t backlog = 0;                          // ready and due rows (capped, as the signature)
    std::optional<std::chrono::milliseconds> other_lease{};  // another instance serves it: until its lease expires
    bool other_first = false;  // that instance leased first: it keeps an outbox both began on at once
  };
  // Whether to leave the outbox to the other instance that serves it.
  static bool leave_to_other(const Baseline& baseline, std::uint64_t join_backlog) {
    return baseline.other_lease && baseline.backlog < join_backlog;
  }
  // Whether a serve job that began while another instance began too (each
  // looked before the other's leases were there) lets go once quiescent:
  // the one that leased later, or holds no lease at all.
  static bool let_go_joined(const Baseline& baseline, std::uint64_t join_backlog) {
    return baseline.other_first && leave_to_other(baseline, join_backlog);
  }
  void on_checked(Id id, const Baseline& baseline);
  void on_released(Id id, const Baseline& baseline);  // served until quiescent
  void on_yielded(Id id);                             // stopped when asked, rows may be left
  void on_served_elsewhere(Id id, const Baseline& baseline);  // its serve job looked first: leave_to_other()
  void on_failed(Id id);                              // the database failed it: retried after a backoff
  void on_check_failed(Id id);

  // What the free workers should do now, oldest first, and who should yield.
  struct Plan {
    std::vector<Id> serve;
    std::vector<std::vector<Id>> checks;  // one job each: outboxes of one database
    std::vector<Id> yield;
  };
  Plan plan(std::size_t free_workers);
  // Whether something waits that no free worker took at the last plan: a
  // quiescent served outbox should give its worker back at once.
  bool contended() const { return contended_; }

  State state(Id id) const;
  std::optional<core::SteadyTime> next_deadline() const;
  std::size_t count(State state) const;

 private:
  struct Outbox {
    bool present = false;
    bool removed = false;  // gone from the config while a job held it
    std::size_t database = 0;
    State state = State::unchecked;
    bool listened = false;
    bool releasing = false;
    bool notified_releasing = false;
    bool yield_asked = false;
    bool recheck = false;  // its listener came or went while a check held it: check again at once
    int failures = 0;
    std::optional<std::string> signature;  // the baseline: none before the first measure
    core::SteadyTime since{};              // wanted, serving: since when; dormant, broken, elsewhere: next check
    std::optional<core::SteadyTime> wake;  // dormant: its next due time
    // Orders outboxes wanted at the same moment (woken by one check, one
    // burst of writes): each daemon's own order, so that daemons sharing the
    // outboxes start on different ones first and find each other's leases.
    double tie = 0;
  };
  Outbox& at(Id id);
  void make_dormant(Outbox& outbox, const Baseline& baseline, core::SteadyTime now);
  void make_elsewhere(Outbox& outbox, const Baseline& baseline, core::SteadyTime now);
  void finish_job(Id id);
  core::Duration check_interval(const Outbox& outbox);
  void promote_due(core::SteadyTime now);
  void gather_checks(Plan& plan, const std::map<std::size_t, std::size_t>& check_job, core::SteadyTime now);

  TenantPolicy policy_;
  const core::Clock& clock_;
  core::RandomSource& random_;
  std::vector<Outbox> outboxes_;
  bool contended_ = false;
};

const char* to_string(TenantSchedule::State state);

}  // namespace outboxd::dispatch
