// Supervisor: /healthz and /readyz, the outbox gauges, systemd's READY=1 and STATUS=, the stats line.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <tuple>

#include "daemon/tenants/supervisor.hpp"

namespace outboxd::daemon::tenants {

using State = dispatch::TenantSchedule::State;

void Supervisor::report() {
  const auto now = clock_.now();
  metrics::beat(health_, now);
  const bool broker_up = router_.up();
  const auto broken = schedule_.count(State::broken);
  const auto known = by_name_.size();
  health_.broker_up = broker_up;
  health_.database_up = known == 0 || broken < known;  // one unreachable tenant does not make the daemon unready
  health_.leases_held = true;                          // each serve job holds its own
  std::vector<metrics::GaugeSet::Sample> states;
  for (const auto state : {State::unchecked, State::dormant, State::wanted, State::serving, State::checking,
                           State::broken, State::elsewhere}) {
    states.push_back({{{"state", dispatch::to_string(state)}}, static_cast<double>(schedule_.count(state))});
  }
  states_.replace(std::move(states));
  report_outboxes();
  std::size_t listeners = 0;
  for (const auto& database : databases_) listeners += database.listener ? 1 : 0;
  connections_.set(static_cast<std::int64_t>(listeners + jobs_));
  if (!announced_ready_ && broker_up) {
    service_.ready();
    announced_ready_ = true;
  }
  if (stopping_) {
    service_.status("stopping", fmt::format("{} outboxes still served", schedule_.count(State::serving)), false);
  } else if (!broker_up) {
    service_.status("waiting for the broker", "", false);
  } else {
    service_.status("dispatching",
                    fmt::format("{} outboxes: {} served, {} broken", known, schedule_.count(State::serving), broken),
                    false);
  }
  service_.keep_alive();
}

// One series per outbox would grow with the tenants; the 50 that matter
// most now are kept: broken first, then those owing the most rows as last
// seen (a served one's loop measures its backlog while it runs), then those
// that dispatched most. The others are counted in outboxd_outboxes.
void Supervisor::report_outboxes() {
  constexpr std::size_t kShown = 50;
  std::vector<OutboxId> shown;
  for (OutboxId id = 0; id < outboxes_.size(); ++id) {
    Outbox& outbox = outboxes_[id];
    if (!outbox.present) continue;
    if (outbox.control && outbox.control->backlog >= 0) outbox.waiting = outbox.control->backlog;
    shown.push_back(id);
  }
  const auto rank = [this](OutboxId id) {
    const Outbox& outbox = outboxes_[id];
    return std::make_tuple(schedule_.state(id) != State::broken, -outbox.waiting, ~outbox.totals.dispatched);
  };
  const auto cut = std::min(shown.size(), kShown);
  std::partial_sort(shown.begin(), shown.begin() + static_cast<std::ptrdiff_t>(cut), shown.end(),
                    [&rank](OutboxId a, OutboxId b) { return rank(a) < rank(b); });
  shown.resize(cut);
  std::vector<metrics::GaugeSet::Sample> states, dispatched, backlog;
  for (const OutboxId id : shown) {
    const auto& name = outboxes_[id].entry.name;
    states.push_back({{{"outbox", name}, {"state", dispatch::to_string(schedule_.state(id))}}, 1.0});
    dispatched.push_back({{{"outbox", name}}, static_cast<double>(outboxes_[id].totals.dispatched)});
    backlog.push_back({{{"outbox", name}}, static_cast<double>(outboxes_[id].waiting)});
  }
  outbox_states_.replace(std::move(states));
  outbox_dispatched_.replace(std::move(dispatched));
  outbox_backlog_.replace(std::move(backlog));
}

void Supervisor::log_stats() {
  const auto interval = config_.dispatch.stats_interval;
  const auto now = clock_.now();
  if (interval.count() <= 0 || now < next_stats_) return;
  next_stats_ = now + interval;
  std::uint64_t dispatched = 0;
  for (const auto& outbox : outboxes_) dispatched += outbox.totals.dispatched;
  const auto delta = dispatched - dispatched_at_last_stats_;
  dispatched_at_last_stats_ = dispatched;
  const auto served = schedule_.count(State::serving);
  if (delta == 0 && served == 0) return;
  spdlog::info("outboxes: {} known, {} served, {} left to other instances, {} broken; dispatched {} by the loops "
               "that let go in the last {} s",
               by_name_.size(), served, schedule_.count(State::elsewhere), schedule_.count(State::broken), delta,
               std::chrono::duration_cast<std::chrono::seconds>(interval).count());
}

}  // namespace outboxd::daemon::tenants
