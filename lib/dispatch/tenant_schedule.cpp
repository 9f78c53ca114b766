// TenantSchedule: the states of many outboxes and the plan for the free workers, oldest first.
#include "dispatch/tenant_schedule.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace outboxd::dispatch {

using State = TenantSchedule::State;

const char* to_string(State state) {
  switch (state) {
    case State::unchecked: return "unchecked";
    case State::dormant: return "dormant";
    case State::wanted: return "wanted";
    case State::serving: return "serving";
    case State::checking: return "checking";
    case State::broken: return "broken";
    case State::elsewhere: return "elsewhere";
  }
  return "unknown";
}

TenantSchedule::TenantSchedule(TenantPolicy policy, const core::Clock& clock, core::RandomSource& random)
    : policy_(policy), clock_(clock), random_(random) {}

TenantSchedule::Outbox& TenantSchedule::at(Id id) { return outboxes_.at(id); }

bool TenantSchedule::known(Id id) const { return id < outboxes_.size() && outboxes_[id].present; }

TenantSchedule::State TenantSchedule::state(Id id) const { return outboxes_.at(id).state; }

void TenantSchedule::add(Id id, std::size_t database) {
  if (id >= outboxes_.size()) outboxes_.resize(id + 1);
  Outbox& outbox = outboxes_[id];
  outbox = Outbox{};
  outbox.present = true;
  outbox.database = database;
  outbox.since = clock_.now();  // its first check is due now
  outbox.tie = random_.uniform();
}

bool TenantSchedule::remove(Id id) {
  if (!known(id)) return false;
  Outbox& outbox = at(id);
  if (outbox.state == State::serving || outbox.state == State::checking) {
    outbox.removed = true;
    return outbox.state == State::serving;
  }
  outbox = Outbox{};
  return false;
}

// At a random point of the interval's last fifth: outboxes found at one
// moment (a start, a reload, a database back) would otherwise come due
// together, for ever, and one check job would take hundreds of them at a time
// while a NOTIFY for one of them waits for its end. Never later than the interval.
core::Duration TenantSchedule::check_interval(const Outbox& outbox) {
  const core::Duration interval = outbox.listened ? policy_.listened_check : policy_.idle_check;
  return interval - std::chrono::duration_cast<core::Duration>(interval * (random_.uniform() / 5));
}

// A listener that came must see the outbox registered for NOTIFY; one that
// went leaves a gap only a check closes. Either way: check it now.
void TenantSchedule::set_listened(Id id, bool listened) {
  Outbox& outbox = at(id);
  if (outbox.listened == listened) return;
  outbox.listened = listened;
  if (outbox.state == State::checking) outbox.recheck = true;  // that check registered it for the old listener
  check_now(id);
}

void TenantSchedule::check_now(Id id) {
  if (known(id) && at(id).state == State::dormant) at(id).since = clock_.now();
}

void TenantSchedule::on_notified(Id id) {
  if (!known(id)) return;
  Outbox& outbox = at(id);
  switch (outbox.state) {
    case State::unchecked:
    case State::dormant:
      outbox.state = State::wanted;
      outbox.since = clock_.now();
      break;
    case State::serving:
      // Before the release began the run loop hears the NOTIFY itself; after
      // it, the rows may have come after its last claim.
      if (outbox.releasing) outbox.notified_releasing = true;
      break;
    case State::checking:
      outbox.notified_releasing = true;
      break;
    case State::wanted:
    case State::broken:
    case State::elsewhere:  // its server hears it
      break;
  }
}

void TenantSchedule::on_releasing(Id id) {
  if (known(id) && at(id).state == State::serving) at(id).releasing = true;
}

// A job ended: the outbox leaves serving or checking. False when the outbox
// was removed meanwhile (and is now forgotten).
void TenantSchedule::finish_job(Id id) {
  Outbox& outbox = at(id);
  outbox.releasing = false;
  outbox.yield_asked = false;
  if (outbox.removed) outbox = Outbox{};
}

void TenantSchedule::make_dormant(Outbox& outbox, const Baseline& baseline, core::SteadyTime now) {
  if (leave_to_other(baseline, policy_.join_backlog)) return make_elsewhere(outbox, baseline, now);
  const bool changed = outbox.signature ? *outbox.signature != baseline.signature : baseline.rows_waiting;
  const bool notified = outbox.notified_releasing;
  outbox.signature = baseline.signature;
  outbox.notified_releasing = false;
  outbox.failures = 0;
  outbox.wake.reset();
  if (baseline.next_due) outbox.wake = core::saturating_add(now, *baseline.next_due);
  if (notified || (outbox.wake && *outbox.wake <= now)) {
    outbox.state = State::wanted;
    outbox.since = now;
    return;
  }
  outbox.state = changed ? State::wanted : State::dormant;
  outbox.since = changed || outbox.recheck ? now : now + check_interval(outbox);
  outbox.recheck = false;
}

// Looked at again when the other's lease would expire: before, if it lives,
// it renews; after, a dead one's rows are ours. Never later than lease_ttl
// (a clock step on the server), never in a tight loop (a lease about to be
// renewed). What the other left undone is unknown, as after a failure: any
// waiting row wakes it then.
void TenantSchedule::make_elsewhere(Outbox& outbox, const Baseline& baseline, core::SteadyTime now) {
  const core::Duration left = *baseline.other_lease;
  outbox.state = State::elsewhere;
  outbox.since = now + std::clamp(left, policy_.lease_ttl / 10, policy_.lease_ttl);
  outbox.signature.reset();
  outbox.notified_releasing = false;
  outbox.recheck = false;
  outbox.failures = 0;
  outbox.wake.reset();
}

void TenantSchedule::on_checked(Id id, const Baseline& baseline) {
  if (!known(id)) return;
  finish_job(id);
  if (!known(id)) return;
  make_dormant(at(id), baseline, clock_.now());
}

// The release measured the baseline after its last claim found nothing: what
// is there now stays asleep until it changes.
void TenantSchedule::on_released(Id id, const Baseline& baseline) {
  if (!known(id)) return;
  finish_job(id);
  if (!known(id)) return;
  Outbox& outbox = at(id);
  outbox.signature = baseline.signature;  // its own measure: unchanged by definition
  make_dormant(outbox, baseline, clock_.now());
}

void TenantSchedule::on_yielded(Id id) {
  if (!known(id)) return;
  finish_job(id);
  if (!known(id)) return;
  Outbox& outbox = at(id);
  outbox.failures = 0;
  outbox.notified_releasing = false;
  outbox.state = State::wanted;
  outbox.since = clock_.now();  // the back of the queue
}

void TenantSchedule::on_served_elsewhere(Id id, const Baseline& baseline) {
  if (!known(id)) return;
  finish_job(id);
  if (!known(id)) return;
  make_elsewhere(at(id), baseline, clock_.now());
}

void TenantSchedule::on_failed(Id id) {
  if (!known(id)) return;
  finish_job(id);
  if (!known(id)) return;
  Outbox& outbox = at(id);
  ++outbox.failures;
  outbox.notified_releasing = false;
  outbox.signature.reset();  // what it left undone is unknown: any waiting row wakes it
  outbox.state = State::broken;
  outbox.since = clock_.now() + Backoff(policy_.retry).bounded_delay(outbox.failures, random_);
}

void TenantSchedule::on_check_failed(Id id) { on_failed(id); }

void TenantSchedule::promote_due(core::SteadyTime now) {
  for (auto& outbox : outboxes_) {
    if (outbox.present && outbox.state == State::dormant && outbox.wake && *outbox.wake <= now) {
      outbox.state = State::wanted;
      outbox.since = *outbox.wake;
      outbox.wake.reset();
    }
  }
}

// A check job also takes the dormant outboxes of its database that fall due
// within check_gather: one connection for several looks, where the spread
// of the check times would otherwise open one for each.
void TenantSchedule::gather_checks(Plan& plan, const std::map<std::size_t, std::size_t>& check_job,
                                   core::SteadyTime now) {
  if (check_job.empty()) return;
  for (Id id = 0; id < outboxes_.size(); ++id) {
    Outbox& outbox = outboxes_[id];
    if (!outbox.present || outbox.removed || outbox.state != State::dormant || outbox.since <= now ||
        outbox.since > now + policy_.check_gather) {
      continue;
    }
    const auto job = check_job.find(outbox.database);
    if (job == check_job.end() || plan.checks[job->second].size() >= policy_.check_batch) continue;
    outbox.state = State::checking;
    plan.checks[job->second].push_back(id);
  }
}

TenantSchedule::Plan TenantSchedule::plan(std::size_t free_workers) {
  const auto now = clock_.now();
  promote_due(now);
  // Everything waiting for a worker, oldest first; a check is due at its time.
  std::vector<std::tuple<core::SteadyTime, double, Id>> waiting;
  for (Id id = 0; id < outboxes_.size(); ++id) {
    const Outbox& outbox = outboxes_[id];
    if (!outbox.present || outbox.removed) continue;
    const bool check = outbox.state == State::unchecked || outbox.state == State::dormant ||
                       outbox.state == State::broken || outbox.state == State::elsewhere;
    if ((outbox.state == State::wanted || check) && outbox.since <= now) {
      waiting.emplace_back(outbox.since, outbox.tie, id);
    }
  }
  std::sort(waiting.begin(), waiting.end());
  Plan plan;
  std::size_t left = 0;  // jobs that found no worker
  std::map<std::size_t, std::size_t> check_job;  // database -> index in plan.checks
  for (const auto& [due, tie, id] : waiting) {
    Outbox& outbox = outboxes_[id];
    if (outbox.state == State::wanted) {
      if (free_workers == 0) {
        ++left;
        continue;
      }
      --free_workers;
      outbox.state = State::serving;
      outbox.since = now;
      plan.serve.push_back(id);
      continue;
    }
    auto job = check_job.find(outbox.database);
    if (job == check_job.end() || plan.checks[job->second].size() >= policy_.check_batch) {
      if (free_workers == 0) {
        if (job == check_job.end()) ++left;
        continue;
      }
      --free_workers;
      job = check_job.insert_or_assign(outbox.database, plan.checks.size()).first;
      plan.checks.emplace_back();
    }
    outbox.state = State::checking;
    plan.checks[job->second].push_back(id);
  }
  gather_checks(plan, check_job, now);
  contended_ = left > 0;
  // The longest served yield first, one per job left waiting.
  std::vector<std::pair<core::SteadyTime, Id>> served;
  for (Id id = 0; id < outboxes_.size(); ++id) {
    const Outbox& outbox = outboxes_[id];
    if (outbox.present && outbox.state == State::serving && !outbox.yield_asked && !outbox.releasing &&
        outbox.since + policy_.slice <= now) {
      served.emplace_back(outbox.since, id);
    }
  }
  std::sort(served.begin(), served.end());
  for (std::size_t i = 0; i < served.size() && i < left; ++i) {
    outboxes_[served[i].second].yield_asked = true;
    plan.yield.push_back(served[i].second);
  }
  return plan;
}

std::optional<core::SteadyTime> TenantSchedule::next_deadline() const {
  std::optional<core::SteadyTime> next;
  const auto earliest = [&next](core::SteadyTime at) {
    if (!next || at < *next) next = at;
  };
  for (const auto& outbox : outboxes_) {
    if (!outbox.present || outbox.removed) continue;
    switch (outbox.state) {
      case State::unchecked:
      case State::wanted:
      case State::broken:
      case State::elsewhere:
        earliest(outbox.since);
        break;
      case State::dormant:
        earliest(outbox.since);
        if (outbox.wake) earliest(*outbox.wake);
        break;
      case State::serving:
        if (contended_ && !outbox.yield_asked) earliest(outbox.since + policy_.slice);
        break;
      case State::checking:
        break;
    }
  }
  return next;
}

std::size_t TenantSchedule::count(State state) const {
  return static_cast<std::size_t>(std::count_if(outboxes_.begin(), outboxes_.end(), [state](const Outbox& outbox) {
    return outbox.present && outbox.state == state;
  }));
}

}  // namespace outboxd::dispatch
