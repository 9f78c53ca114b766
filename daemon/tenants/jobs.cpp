// The three jobs a worker runs: serve an outbox with a run loop, check dormant ones, open a listener.
#include "daemon/tenants/jobs.hpp"

#include <spdlog/spdlog.h>

#include <charconv>
#include <string_view>

#include "daemon/run/database_connection.hpp"
#include "daemon/run/run_loop.hpp"
#include "daemon/tenants/tenant_ports.hpp"
#include "log/log.hpp"
#include "pg/outbox_catalog.hpp"

namespace outboxd::daemon::tenants {

void Mailbox::post(JobReport report) {
  {
    std::lock_guard lock(mutex_);
    reports_.push_back(std::move(report));
  }
  wake_.notify();
}

std::vector<JobReport> Mailbox::take() {
  std::vector<JobReport> taken;
  std::lock_guard lock(mutex_);
  std::swap(taken, reports_);
  return taken;
}

namespace {

// The count of one group of a WatchStore signature ("r:3:1234 s:0:0 p:1:17").
std::uint64_t group_count(std::string_view signature, std::string_view group) {
  const auto at = signature.find(group);
  if (at == std::string_view::npos) return 0;
  std::uint64_t count = 0;
  const char* from = signature.data() + at + group.size();
  std::from_chars(from, signature.data() + signature.size(), count);
  return count;
}

// Whether another instance began on the outbox at the same moment and keeps
// it. A failed look is no: the loop meets the database's error itself.
bool other_keeps_it(const JobContext& context, const ServeOrder& order, DatabaseConnection& db) {
  if (!db.connection()) return false;
  auto seen = pg::WatchStore(*db.connection(), order.config.outbox.schema).check(context.instance_id);
  return seen && dispatch::TenantSchedule::let_go_joined(baseline_of(std::move(seen).value()), order.join_backlog);
}

// Serves until the loop ends; returns how it ended. Runs the loop's own
// steps only: between two turns it reads the supervisor's orders.
JobReport::End run_until_let_go(const JobContext& context, const ServeOrder& order, RunLoop& loop,
                                DatabaseConnection& db, const core::Clock& clock, std::optional<Baseline>& left) {
  JobControl& control = *order.control;
  if (loop.start()) return JobReport::End::failed;
  bool quiet = false;  // quiescent since quiet_since
  core::SteadyTime quiet_since{};
  // Looks for another instance that began at the same moment once a lease
  // renewal, from the first turn on (its leases taken): a loop that holds
  // none may never be quiescent, so it stops as if asked to yield.
  core::SteadyTime next_look = clock.now();
  bool leaving = false;
  bool releasing = false;
  // While others wait, a turn that leaves the loop quiescent returns before
  // its sleep: the worker is let go then, not at the next wake (up to kTick).
  while (loop.iterate(context.contended && !releasing)) {
    if (!db.up()) return JobReport::End::failed;  // the supervisor tries again after a backoff
    if (const auto rows = loop.backlog_rows()) control.backlog = *rows;
    if (control.shutdown || control.yield) {
      loop.request_stop();
      continue;
    }
    if (releasing || leaving) continue;
    const auto now = clock.now();
    if (now >= next_look) {
      next_look = now + order.config.leases.renew_interval;
      if ((leaving = other_keeps_it(context, order, db))) {
        loop.request_stop();
        continue;
      }
    }
    if (!loop.quiescent()) {
      quiet = false;
      left.reset();
      continue;
    }
    if (!quiet) {
      quiet = true;
      quiet_since = now;
    }
    if (!context.contended && now - quiet_since < order.release_after) continue;
    // What it leaves, for the watcher to compare with, measured while the
    // loop still hears writers; the claim that follows sees every row the
    // measure saw, so none of them is asleep in the baseline unseen. A row
    // committed after the measure changes the signature.
    if (!left) {
      auto seen = pg::WatchStore(*db.connection(), order.config.outbox.schema).check(context.instance_id);
      if (!seen) {
        spdlog::warn("measuring what is left: {}", seen.error().message);
        return JobReport::End::failed;
      }
      left = baseline_of(std::move(seen).value());
      loop.claim_again();
      continue;
    }
    // Writers must NOTIFY someone at every moment: the watch row (idle) is
    // in place before the loop's own row goes.
    control.releasing = true;
    if (order.listened) {
      if (auto watched = pg::WatchStore(*db.connection(), order.config.outbox.schema).watch(context.watcher_id);
          !watched) {
        spdlog::warn("registering for wake-ups: {}", watched.error().message);
        return JobReport::End::failed;
      }
    }
    releasing = true;
    loop.request_stop();
  }
  if (control.shutdown) return JobReport::End::stopped;
  if (control.yield || leaving) return JobReport::End::yielded;
  return releasing ? JobReport::End::released : JobReport::End::failed;
}

// The serve job's look before it registers: its connection, handed to the
// run loop, or a report that ends the job (left to another, or failed).
std::optional<pg::Connection> look_first(const JobContext& context, const ServeOrder& order, JobReport& report) {
  auto opened = open_database(order.config.database, "outboxd " + context.instance_id);
  auto seen = opened ? pg::WatchStore(opened.value(), order.config.outbox.schema).check(context.instance_id)
                     : core::Result<pg::WatchCheck>(opened.error());
  if (!seen) {
    report.end = JobReport::End::failed;
    report.error = seen.error().message;
    report.at_look = !opened;  // the checks that follow meet the same error: logged once
    return std::nullopt;
  }
  report.baseline = baseline_of(std::move(seen).value());
  if (dispatch::TenantSchedule::leave_to_other(report.baseline, order.join_backlog)) {
    report.end = JobReport::End::elsewhere;
    return std::nullopt;
  }
  return std::move(opened).value();
}

}  // namespace

Baseline baseline_of(pg::WatchCheck seen) {
  const std::uint64_t backlog = group_count(seen.signature, "r:") + group_count(seen.signature, "s:");
  return {std::move(seen.signature), backlog > 0, seen.next_due, backlog, seen.other_lease, seen.other_first};
}

void serve(const JobContext& context, ServeOrder order) {
  log::set_thread_outbox(order.name);
  JobReport report;
  report.kind = JobReport::Kind::serve;
  report.id = order.id;
  if (auto looked = look_first(context, order, report)) {
    core::SteadyClock clock;
    core::FastRandom random(static_cast<std::uint64_t>(clock.now().time_since_epoch().count()) ^ order.route);
    DatabaseConnection db(order.config, context.instance_id, clock, random, /*verify_listen=*/false);
    db.adopt(std::move(*looked));
    TenantBroker broker(context.publisher, context.router, order.route, order.name, order.control->wake);
    TenantEvents events(order.control->wake);
    RunLoop loop(order.config, context.instance_id, {db, broker, events, clock, random}, RunLoop::Role::tenant);
    std::optional<Baseline> left;
    report.end = run_until_let_go(context, order, loop, db, clock, left);
    report.watched = order.listened && report.end == JobReport::End::released;
    if (loop.finish() != 0 && report.end != JobReport::End::stopped) report.end = JobReport::End::failed;
    report.totals = loop.totals();
    if (report.end == JobReport::End::released) report.baseline = std::move(*left);
  }
  log::set_thread_outbox("");
  context.mailbox.post(std::move(report));
}

void check(const JobContext& context, config::DatabaseConfig database, std::vector<CheckItem> items) {
  JobReport report;
  report.kind = JobReport::Kind::check;
  auto connection = open_database(database, "outboxd " + context.instance_id + " watch");
  for (const auto& item : items) {
    JobReport::Checked checked{item.id, std::nullopt, ""};
    if (!connection) {
      checked.error = connection.error().message;
      report.checked.push_back(std::move(checked));
      continue;
    }
    pg::WatchStore store(connection.value(), item.schema);
    core::Status registered;
    if (item.action == WatchAction::watch) registered = store.watch(context.watcher_id);
    if (item.action == WatchAction::unwatch) registered = store.unwatch(context.watcher_id);
    auto measured = registered ? store.check(context.instance_id) : core::Result<pg::WatchCheck>(registered.error());
    if (measured) {
      checked.baseline = baseline_of(std::move(measured).value());
    } else {
      checked.error = measured.error().message;
    }
    report.checked.push_back(std::move(checked));
  }
  context.mailbox.post(std::move(report));
}

void listen(const JobContext& context, std::size_t database_index, config::DatabaseConfig database,
            std::vector<std::string> channels) {
  JobReport report;
  report.kind = JobReport::Kind::listen;
  report.database = database_index;
  auto connection = open_database(database, "outboxd " + context.instance_id + " listen");
  core::Status listening = connection ? core::Status{} : core::Status{connection.error()};
  for (std::size_t i = 0; listening && i < channels.size(); ++i) listening = connection.value().listen(channels[i]);
  if (listening) report.listener.emplace(std::move(connection).value());
  else report.error = listening.error().message;
  context.mailbox.post(std::move(report));
}

void read_catalog(const JobContext& context, config::Config config) {
  JobReport report;
  report.kind = JobReport::Kind::catalog;
  auto connection = open_database(config.tenants.catalog.database, "outboxd " + context.instance_id + " catalog");
  auto read = connection ? pg::resolve_outboxes(config, &connection.value())
                         : core::Result<config::OutboxSet>(connection.error());
  if (read) report.outboxes = std::move(read).value();
  else report.error = read.error().message;
  context.mailbox.post(std::move(report));
}

}  // namespace outboxd::daemon::tenants
