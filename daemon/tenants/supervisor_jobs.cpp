// Supervisor: the workers' reports applied, listeners opened and drained, the schedule's plan started.
#include <spdlog/spdlog.h>

#include "daemon/tenants/supervisor.hpp"
#include "pg/outbox_sql.hpp"

namespace outboxd::daemon::tenants {

void Supervisor::take_reports() {
  for (auto& report : mailbox_.take()) {
    --jobs_;
    apply(std::move(report));
  }
}

void Supervisor::apply(JobReport report) {
  switch (report.kind) {
    case JobReport::Kind::serve: return apply_serve(report);
    case JobReport::Kind::check: return apply_check(report);
    case JobReport::Kind::listen: return apply_listen(std::move(report));
    case JobReport::Kind::catalog: return apply_catalog(report);
  }
}

void Supervisor::apply_serve(const JobReport& report) {
  Outbox& outbox = outboxes_[report.id];
  outbox.control.reset();
  outbox.totals.dispatched += report.totals.dispatched;
  outbox.totals.parked += report.totals.parked;
  outbox.totals.retried += report.totals.retried;
  switch (report.end) {
    case JobReport::End::released:
      outbox.watched = report.watched;
      outbox.waiting = static_cast<std::int64_t>(report.baseline.backlog);
      note_recovery(report.id);
      schedule_.on_released(report.id, report.baseline);
      // A listener that came while it was served does not hear it yet.
      if (databases_[outbox.database].listener && !report.watched) schedule_.check_now(report.id);
      break;
    case JobReport::End::yielded:
    case JobReport::End::stopped:
      note_recovery(report.id);
      schedule_.on_yielded(report.id);
      break;
    case JobReport::End::elsewhere:
      note_recovery(report.id);
      schedule_.on_served_elsewhere(report.id, report.baseline);
      break;
    case JobReport::End::failed:
      note_failure(report.id, report.error.empty() ? "its run loop ended on a database error" : report.error,
                   report.at_look);
      schedule_.on_failed(report.id);
      break;
  }
}

void Supervisor::apply_check(const JobReport& report) {
  for (const auto& checked : report.checked) {
    if (!outboxes_[checked.id].present) {
      schedule_.on_check_failed(checked.id);  // forgets it: it was removed while checked
      continue;
    }
    if (!checked.baseline) {
      note_failure(checked.id, checked.error, true);
      schedule_.on_check_failed(checked.id);
      continue;
    }
    note_recovery(checked.id);
    outboxes_[checked.id].waiting = static_cast<std::int64_t>(checked.baseline->backlog);
    schedule_.on_checked(checked.id, *checked.baseline);
  }
}

// Every outbox of the database is checked once its LISTEN is in place (the
// watch row registered): a NOTIFY sent before it was missed.
void Supervisor::apply_listen(JobReport report) {
  Database& database = databases_[report.database];
  database.opening = false;
  if (!report.listener) {
    ++database.failures;
    database.retry_at = clock_.now() + dispatch::Backoff({config_.database.reconnect_min,
                                                          config_.database.reconnect_max, 2.0, 0.2})
                                           .bounded_delay(database.failures, random_);
    if (database.failures == 1) spdlog::warn("listening for wake-ups on {}: {}", database.key, report.error);
    return;
  }
  if (!database.listening_wanted) return;  // the listeners moved meanwhile: the connection closes here
  database.failures = 0;
  database.listener = std::move(report.listener);
  for (const OutboxId id : database.outboxes) {
    schedule_.set_listened(id, true);
    database.channels[pg::outbox_sql::wakeup_channel(outboxes_[id].entry.outbox.schema)] = id;
  }
}

// A catalog that cannot be read leaves the outboxes as they are: a catalog
// database down for a minute must not make every tenant let go.
void Supervisor::apply_catalog(const JobReport& report) {
  catalog_reading_ = false;
  catalog_due_ = clock_.now() + config_.tenants.catalog.refresh_interval;
  if (!report.outboxes) {
    spdlog::warn("reading the catalog of outboxes: {}; serving the {} known until the next read", report.error,
                 by_name_.size());
    return;
  }
  if (report.outboxes->problems != catalog_problems_) {
    for (const auto& problem : report.outboxes->problems) spdlog::warn("catalog of outboxes: {}", problem);
    catalog_problems_ = report.outboxes->problems;
  }
  adopt(report.outboxes->entries);
}

// Every refresh_interval and after a reload, on a worker like any job.
void Supervisor::read_catalog_when_due() {
  if (!catalog_due_ || catalog_reading_ || clock_.now() < *catalog_due_ || free_workers() == 0) return;
  catalog_reading_ = true;
  ++jobs_;
  workers_->submit([this, config = config_]() mutable { read_catalog(context_, std::move(config)); });
}

void Supervisor::note_failure(OutboxId id, const std::string& why, bool check) {
  Outbox& outbox = outboxes_[id];
  if (why == outbox.failure) return;
  outbox.failure = why;
  spdlog::warn("outbox {}: {}{}; trying again after a backoff", outbox.entry.name, check ? "checking it: " : "",
               why);
}

void Supervisor::note_recovery(OutboxId id) {
  Outbox& outbox = outboxes_[id];
  if (outbox.failure.empty()) return;
  spdlog::info("outbox {}: reachable again", outbox.entry.name);
  outbox.failure.clear();
}

void Supervisor::open_listeners() {
  const auto now = clock_.now();
  for (std::size_t i = 0; i < databases_.size(); ++i) {
    Database& database = databases_[i];
    if (!database.listening_wanted || database.listener || database.opening || now < database.retry_at) continue;
    if (free_workers() == 0) return;
    std::vector<std::string> channels;
    for (const OutboxId id : database.outboxes) {
      channels.push_back(pg::outbox_sql::wakeup_channel(outboxes_[id].entry.outbox.schema));
    }
    database.opening = true;
    ++jobs_;
    workers_->submit([this, i, config = database.config, channels = std::move(channels)]() mutable {
      listen(context_, i, std::move(config), std::move(channels));
    });
  }
}

void Supervisor::drain_listeners() {
  for (auto& database : databases_) {
    if (!database.listener) continue;
    auto channels = database.listener->take_notifications();
    if (!channels) {
      drop_listener(database, channels.error().message);
      continue;
    }
    for (const auto& channel : channels.value()) {
      if (const auto found = database.channels.find(channel); found != database.channels.end()) {
        schedule_.on_notified(found->second);
      }
    }
  }
}

// Its outboxes go back to being checked: at once, since a NOTIFY may have been lost.
void Supervisor::drop_listener(Database& database, const std::string& why) {
  if (!why.empty()) spdlog::warn("listener on {} closed: {}", database.key, why);
  database.listener.reset();
  database.channels.clear();
  for (const OutboxId id : database.outboxes) schedule_.set_listened(id, false);
}

void Supervisor::run_plan() {
  const auto plan = schedule_.plan(free_workers());
  for (const OutboxId id : plan.serve) start_serve(id);
  for (const auto& ids : plan.checks) start_check(ids);
  for (const OutboxId id : plan.yield) {
    if (auto& control = outboxes_[id].control) {
      control->yield = true;
      control->wake.notify();
    }
  }
  set_contended(schedule_.contended());
}

void Supervisor::start_serve(OutboxId id) {
  Outbox& outbox = outboxes_[id];
  outbox.control = std::make_shared<JobControl>();
  ServeOrder order{id,
                   outbox.entry.name,
                   outbox.config,
                   next_route_++,
                   databases_[outbox.database].listener.has_value(),
                   config_.tenants.release_after,
                   schedule_.policy().join_backlog,
                   outbox.control};
  if (next_route_ == 0) next_route_ = 1;
  ++jobs_;
  workers_->submit([this, order = std::move(order)]() mutable { serve(context_, std::move(order)); });
}

// A listened outbox registers its watch row at every check (its heartbeat);
// one no longer listened to takes it away once.
void Supervisor::start_check(const std::vector<OutboxId>& ids) {
  std::vector<CheckItem> items;
  for (const OutboxId id : ids) {
    Outbox& outbox = outboxes_[id];
    const bool listened = databases_[outbox.database].listener.has_value();
    const auto action = listened ? WatchAction::watch : outbox.watched ? WatchAction::unwatch : WatchAction::none;
    items.push_back({id, outbox.entry.outbox.schema, action});
    outbox.watched = listened;  // what the check leaves, or tries to: unwatch_all() removes the rest
  }
  ++jobs_;
  workers_->submit([this, config = outboxes_[ids.front()].config.database, items = std::move(items)]() mutable {
    check(context_, std::move(config), std::move(items));
  });
}

// A quiescent outbox lets go of its worker at once while others wait: its
// job reads the flag at its next turn, which the poke brings forward.
void Supervisor::set_contended(bool contended) {
  if (contended_.exchange(contended) == contended || !contended) return;
  for (auto& outbox : outboxes_) {
    if (outbox.control) outbox.control->wake.notify();
  }
}

}  // namespace outboxd::daemon::tenants
