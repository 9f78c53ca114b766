// The claim side of the run loop: the claim, what follows it, NOTIFY and its watch, the wait for the standby.
#include "daemon/run/claim_step.hpp"

#include <spdlog/spdlog.h>

#include <utility>

#include "dispatch/wake_rules.hpp"

namespace outboxd::daemon {

namespace {

using dispatch::Timer;
using std::chrono::milliseconds;
using Mode = config::StandbyWait::Mode;

// First look at transactions that were open when NOTIFY was armed; the delay
// doubles up to the poll interval while they stay open.
constexpr milliseconds kLateCommitCheck{10};

// A standby streaming on a LAN flushes within a millisecond or two of the
// primary: look again after 1 ms, then less often, down to 10 reads a second
// for a standby that stopped reporting. A wait of 5 s is no lag but an outage.
constexpr milliseconds kStandbyFirstCheck{1};
constexpr milliseconds kStandbyLongestCheck{100};
constexpr milliseconds kStandbyWarnAfter{5000};

// Above notify_max_rate poll; back to NOTIFY below 40% of it, judged over 100 ms windows.
dispatch::NotifyPolicy::Settings notify_settings(const config::DispatchConfig& d) {
  const auto rate = static_cast<double>(d.notify_max_rate);
  return {rate, 0.4 * rate, std::chrono::milliseconds(100), d.busy_poll};
}

std::string standby_text(const config::StandbyWait& wait) {
  if (wait.mode == Mode::named) return fmt::format("standby '{}'", wait.application_name);
  return "the most advanced standby";
}

double seconds(core::Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

ClaimStep::Settings ClaimStep::settings_of(const config::Config& config) {
  return {static_cast<std::size_t>(config.dispatch.batch_size), static_cast<std::size_t>(config.dispatch.claim_bytes),
          config::max_message_bytes(config), config.database.wait_for_standby};
}

ClaimStep::ClaimStep(Settings settings, const config::DispatchConfig& dispatch, std::string instance_id,
                     dispatch::RowBook& book, Database& db, const LeaseKeeper& leases, RunLoopMetrics& metrics,
                     dispatch::LoopTimers& timers, const core::Clock& clock, Fail fail)
    : settings_(std::move(settings)),
      instance_id_(std::move(instance_id)),
      book_(book),
      db_(db),
      leases_(leases),
      metrics_(metrics),
      timers_(timers),
      clock_(clock),
      fail_(std::move(fail)),
      late_commits_(kLateCommitCheck, dispatch.poll_interval),
      notify_policy_(notify_settings(dispatch), clock.now()),
      standby_({kStandbyFirstCheck, kStandbyLongestCheck, kStandbyWarnAfter}) {}

bool ClaimStep::possible(bool stopping) const {
  return book_.claim_may_find_rows() && !standby_.waiting() && !stopping && db_.up() && leases_.may_publish() &&
         book_.room_for_claim(settings_.batch);
}

void ClaimStep::claim(bool stopping) {
  if (standby_.waiting()) return check_standby(stopping);
  if (!possible(stopping)) return;
  const auto request = book_.claim_request(settings_.batch, settings_.claim_bytes);
  const auto started = clock_.now();
  const core::ClaimBytes bytes{settings_.max_message, static_cast<std::int64_t>(request.statement_bytes)};
  auto sets = db_.rows().claim(leases_.partitions(), static_cast<int>(request.limit), request.after_id,
                               request.known, bytes, request.lanes, request.horizon);
  if (!sets) return fail_(sets.error());
  metrics_.claim_seconds.observe(std::chrono::duration<double>(clock_.now() - started).count());
  dispatch::WaitingClaim claim{std::move(sets).value(), request, started, leases_.partitions(), book_.pass_restarts()};
  if (settings_.wait_for_standby.mode != Mode::none && claim.rows() > 0) return await_standby(std::move(claim));
  accept(std::move(claim.sets), claim.request, claim.started);
}

void ClaimStep::accept(core::ClaimedSets sets, const dispatch::RowBook::ClaimRequest& request,
                       core::SteadyTime started) {
  const auto claimed = book_.on_claim(std::move(sets), request, started);
  metrics_.claimed.inc(claimed.added);
  if (claimed.statistics_stale) refresh_statistics();
  notify_policy_.on_claim(claimed.rows, clock_.now());
  if (std::exchange(notified_claim_, false)) notify_budget_.on_claim(claimed.rows, clock_.now());
  after(claimed);
}

// A pass read more rows than the planner's statistics count
// (dispatch::StatisticsWatch): the claims' plans were made for a smaller
// table. An ANALYZE makes PostgreSQL plan them again.
void ClaimStep::refresh_statistics() {
  const auto started = clock_.now();
  if (auto refreshed = db_.rows().refresh_statistics(); !refreshed) return fail_(refreshed.error());
  spdlog::info("outbox statistics refreshed (ANALYZE, {} ms): a pass read more rows than they counted",
               std::chrono::duration_cast<milliseconds>(clock_.now() - started).count());
}

// How the next claim comes about (dispatch::after_claim).
void ClaimStep::after(const dispatch::RowBook::Claimed& claimed) {
  const auto next = dispatch::after_claim(claimed.more, notify_policy_.busy(), notify_armed_);
  const auto now = clock_.now();
  if (next.follow_scheduled) {
    timers_.follow(Timer::scheduled, claimed.next_due ? std::optional(core::saturating_add(now, *claimed.next_due))
                                                      : std::nullopt);
  }
  if (next.disarm_notify) arm_notify(false);
  if (next.busy_claim) timers_.set(Timer::busy_claim, clock_.now() + notify_policy_.busy_poll());
}

void ClaimStep::arm_notify(bool armed) {
  if (auto set = db_.rows().arm_notify(instance_id_, armed); !set) return fail_(set.error());
  notify_armed_ = armed;
  if (!armed) return late_commits_.clear();
  // Read after the arming committed: whoever is still open may have inserted
  // without NOTIFY and may commit after the claim that follows.
  auto open = db_.rows().open_transactions();
  if (!open) return fail_(open.error());
  late_commits_.watch(std::move(open).value(), clock_.now());
}

void ClaimStep::on_notified() {
  const auto now = clock_.now();
  if (const auto at = notify_budget_.claim_at(now); at > now) return timers_.set_earlier(Timer::notified, at);
  notified_claim_ = true;
  book_.expect_rows();
}

void ClaimStep::check_late_commits() {
  if (!late_commits_.check_due(clock_.now()) || !db_.up()) return;
  auto open = db_.rows().still_open(late_commits_.watched());
  if (!open) return fail_(open.error());
  if (late_commits_.update(std::move(open).value(), clock_.now())) book_.expect_rows();
}

void ClaimStep::on_reconnect() {
  notify_armed_ = false;
  late_commits_.clear();
}

void ClaimStep::follow_timers() {
  timers_.follow(Timer::late_commit, late_commits_.next_check());
  timers_.follow(Timer::standby, standby_.next_check());
  timers_.follow(Timer::lanes, book_.next_lanes_claim(settings_.batch));
}

// If the position cannot be read, the claim is dropped with the connection:
// its rows are claimed again after reconnecting.
void ClaimStep::await_standby(dispatch::WaitingClaim claim) {
  auto position = db_.rows().standby_position(settings_.wait_for_standby.named());
  if (!position) return fail_(position.error());
  take_cleared(standby_.wait(std::move(claim), position.value().wal, position.value().flushed, clock_.now()));
}

void ClaimStep::check_standby(bool stopping) {
  const auto now = clock_.now();
  if (stopping || !standby_.current(book_.pass_restarts(), leases_.partitions())) {
    // A new connection, new leases or a new pass since the claim: claim again.
    standby_.drop();
    metrics_.standby_waiting_rows.set(0);
    book_.expect_rows();
    return;
  }
  const auto& wait = settings_.wait_for_standby;
  if (wait.mode == Mode::none) return take_cleared(standby_.clear(now));  // switched off by a reload
  if (!db_.up() || !standby_.check_due(now)) return;
  auto position = db_.rows().standby_position(wait.named());
  if (!position) return fail_(position.error());
  take_cleared(standby_.on_flushed(position.value().flushed, now));
  if (const auto late = standby_.overdue(now)) {
    const auto behind = late->lag_bytes ? fmt::format("has flushed WAL only to {} bytes before the claim",
                                                      *late->lag_bytes)
                                        : std::string("does not report (is it streaming? may the role that "
                                                      "ran the migrations read pg_stat_replication?)");
    spdlog::warn("{} claimed rows have waited {:.1f} s: {} {}; nothing is published until it catches up, or until "
                 "database.wait_for_standby is set to none and the config reloaded",
                 late->rows, seconds(late->waited), standby_text(wait), behind);
  }
}

void ClaimStep::take_cleared(std::optional<dispatch::StandbyGate::Cleared> cleared) {
  metrics_.standby_waiting_rows.set(static_cast<std::int64_t>(standby_.waiting_rows()));
  if (!cleared) return;
  metrics_.standby_wait_seconds.observe(seconds(cleared->waited));
  if (cleared->reported) {
    spdlog::info("{} caught up after {:.1f} s: publishing again", standby_text(settings_.wait_for_standby),
                 seconds(cleared->waited));
  }
  auto& claim = cleared->claim;
  accept(std::move(claim.sets), claim.request, claim.started);
}

}  // namespace outboxd::daemon
