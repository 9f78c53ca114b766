// database.wait_for_standby in the run loop: a claim waits for the standby to flush past it before its rows are published.
#include <spdlog/spdlog.h>

#include "daemon/run/run_loop.hpp"

namespace outboxd::daemon {

namespace {

using Mode = config::StandbyWait::Mode;

std::string standby_text(const config::StandbyWait& wait) {
  if (wait.mode == Mode::named) return fmt::format("standby '{}'", wait.application_name);
  return "the most advanced standby";
}

double seconds(core::Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

// If the position cannot be read, the claim is dropped with the connection:
// its rows are claimed again after reconnecting.
void RunLoop::await_standby(dispatch::WaitingClaim claim) {
  auto position = db_.rows().standby_position(config_.database.wait_for_standby.named());
  if (!position) return fail_database(position.error());
  take_cleared(standby_.wait(std::move(claim), position.value().wal, position.value().flushed, clock_.now()));
}

void RunLoop::check_standby() {
  const auto now = clock_.now();
  if (stopping_ || !standby_.current(book_.pass_restarts(), leases_.partitions())) {
    // A new connection, new leases or a new pass since the claim: claim again.
    standby_.drop();
    metrics_.standby_waiting_rows.set(0);
    book_.expect_rows();
    return;
  }
  const auto& wait = config_.database.wait_for_standby;
  if (wait.mode == Mode::none) return take_cleared(standby_.clear(now));  // switched off by a reload
  if (!db_.up() || !standby_.check_due(now)) return;
  auto position = db_.rows().standby_position(wait.named());
  if (!position) return fail_database(position.error());
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

void RunLoop::take_cleared(std::optional<dispatch::StandbyGate::Cleared> cleared) {
  metrics_.standby_waiting_rows.set(static_cast<std::int64_t>(standby_.waiting_rows()));
  if (!cleared) return;
  metrics_.standby_wait_seconds.observe(seconds(cleared->waited));
  if (cleared->reported) {
    spdlog::info("{} caught up after {:.1f} s: publishing again", standby_text(config_.database.wait_for_standby),
                 seconds(cleared->waited));
  }
  auto& claim = cleared->claim;
  accept_claim(std::move(claim.sets), claim.request, claim.started);
}

}  // namespace outboxd::daemon
