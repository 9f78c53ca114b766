// `outboxd console`'s sampler and list of outboxes: each outbox read in turn in the background, the list drawn from that.
#include <spdlog/spdlog.h>

#include "daemon/console/console_app.hpp"
#include "pg/operator_views.hpp"
#include "pg/outbox_store.hpp"

namespace outboxd::daemon {

namespace {

// The reading of one outbox from its status; name, database and schema kept.
void read_into(console::OutboxReading& reading, const pg::StatusReport& report, double at) {
  const auto& t = report.total;
  reading.state = "ok";
  reading.reason.clear();
  reading.ready = t.due;
  reading.retrying = t.retrying;
  reading.scheduled = t.scheduled;
  reading.parked = t.parked;
  reading.oldest_ready_ms.reset();
  if (t.oldest_pending_age) reading.oldest_ready_ms = t.oldest_pending_age->count();
  reading.read_at = at;
}

}  // namespace

void ConsoleApp::sample() {
  // A database that could not be connected to is not tried again this round
  // for its other outboxes (they come one after the other): each try can
  // cost its connect timeout.
  const config::DatabaseConfig* down = nullptr;
  std::optional<core::Error> why_down;
  for (const auto& site : sites_) {
    if (stopping_) return;
    if (down && site->config.database == *down) {
      note_unread(*site, *why_down, monotonic_seconds());
      continue;
    }
    const auto failure = sample(*site);
    if (!failure) continue;
    // With many outboxes, a failure is the outbox's state in the list, logged when it begins.
    if (!many()) spdlog::warn("console: backlog sample skipped: {}", failure->message);
    if (failure->message.rfind(kCannotConnect, 0) == 0) {
      down = &site->config.database;
      why_down = failure;
    }
  }
}

void ConsoleApp::note_unread(OutboxSite& site, const core::Error& error, double at) {
  const std::string state = error.message.rfind(kCannotConnect, 0) == 0 ? "unreachable" : "failed";
  std::lock_guard lock(site.mutex);
  auto& reading = site.reading;
  if (many() && reading.state != state) spdlog::warn("console: outbox {}: {}: {}", site.name, state, error.message);
  reading.state = state;
  reading.reason = error.message;
  reading.read_at = at;
}

std::optional<core::Error> ConsoleApp::sample(OutboxSite& site) {
  console::Sample sample;
  sample.at = monotonic_seconds();
  pg::StatusReport report;
  const auto status = with_database(site, [&](pg::Connection& c) -> core::Status {
    pg::OutboxStore store(c, site.config.outbox.schema);
    auto read = store.status();
    if (!read) return read.error();
    report = std::move(read).value();
    if (auto inserted = pg::OperatorViews(c, site.config.outbox.schema).inserted_total()) {
      sample.inserted = inserted.value();
    }
    return {};
  });
  if (!status) {
    note_unread(site, status.error(), sample.at);
    return status.error();
  }
  std::lock_guard lock(site.mutex);
  if (many() && site.reading.state != "ok" && site.reading.state != "unread") {
    spdlog::info("console: outbox {}: read again", site.name);
  }
  read_into(site.reading, report, sample.at);
  for (const auto& d : report.destinations) {
    sample.destinations[d.destination] = {d.due + d.retrying, d.scheduled, d.parked};
  }
  const auto& t = report.total;
  sample.total = {t.due + t.retrying, t.scheduled, t.parked};
  site.samples.add(std::move(sample));
  return std::nullopt;
}

void ConsoleApp::outboxes(const httplib::Request& request, httplib::Response& response, const Caller& caller) {
  std::vector<console::OutboxReading> readings;
  readings.reserve(sites_.size());
  for (const auto& site : sites_) {
    std::lock_guard lock(site->mutex);
    readings.push_back(site->reading);
  }
  console::rank_outboxes(readings);
  const std::size_t page = console::page_number(request.get_param_value("page"));
  const double now = monotonic_seconds();
  if (wants_json(request)) {
    response.set_content(console::outboxes_json(readings, page, now).dump(2, ' ', false,
                                                                          nlohmann::json::error_handler_t::replace),
                         "application/json; charset=utf-8");
  } else {
    response.set_content(console::outboxes_page({caller.name, caller.csrf}, readings, page, now),
                         "text/html; charset=utf-8");
  }
}

}  // namespace outboxd::daemon
