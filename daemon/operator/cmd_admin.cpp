// `outboxd status`, `requeue`, `skip` and `fire`: operator views and actions on the outbox.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <iostream>

#include <spdlog/spdlog.h>

#include "config/loader.hpp"
#include "daemon/operator/operator_command.hpp"
#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "daemon/operator_text.hpp"
#include "pg/connection.hpp"
#include "pg/operator_actions.hpp"
#include "pg/outbox_store.hpp"

namespace outboxd::daemon {

namespace {

// The name whole (at most 256 characters): two names cut alike would read as one.
void print_row(const std::string& name, const pg::DestinationStatus& s) {
  const std::string age = s.oldest_pending_age ? std::to_string(s.oldest_pending_age->count()) + " ms" : "-";
  std::printf("%-32s %9lld %9lld %9lld %9lld %9lld %14s\n", shown(name, core::kSafeTextMaxBytes).c_str(),
              static_cast<long long>(s.pending),
              static_cast<long long>(s.due), static_cast<long long>(s.scheduled),
              static_cast<long long>(s.retrying), static_cast<long long>(s.parked), age.c_str());
}

// With database.wait_for_standby: how far the standby is behind the primary, or that none reports.
struct StandbyLine {
  std::string waits_for;                  // the standby's name, or "any"
  std::optional<std::int64_t> behind;     // WAL bytes; none: no such standby reports
};

core::Result<std::optional<StandbyLine>> standby_line(pg::OutboxStore& store, const config::StandbyWait& wait) {
  using Mode = config::StandbyWait::Mode;
  if (wait.mode == Mode::none) return std::optional<StandbyLine>();
  const auto name = wait.named();
  auto position = store.standby_position(name);
  if (!position) return position.error();
  StandbyLine line{name.value_or("any"), std::nullopt};
  if (position.value().flushed) line.behind = std::max<std::int64_t>(0, position.value().wal - *position.value().flushed);
  return std::optional<StandbyLine>(std::move(line));
}

using ParkedAction = core::Result<std::vector<std::string>> (pg::OperatorActions::*)(const pg::ParkedTarget&);

// Runs requeue or skip on the target rows in one statement; returns the exit code.
int act_on_parked(const std::string& path, const AdminTarget& target, const char* command, const char* done,
                  ParkedAction action) {
  if (target.message_ids.empty() && !target.all_parked && target.session_id.empty()) {
    std::cerr << command << ": name message ids, --session S or --all-parked\n";
    return kExitUsage;
  }
  return run_operator_command(path, command, [&](OperatorCommand& s) {
    pg::OperatorActions actions(s.connection, s.config.outbox.schema, os_user());
    auto changed = (actions.*action)({target.message_ids, target.session_id, target.all_parked, target.writer});
    if (!changed) return s.failed(changed.error());
    const auto& ids = changed.value();
    if (!ids.empty()) spdlog::info("{}: {} parked row{} {}: {}", command, ids.size(), ids.size() == 1 ? "" : "s", done,
                                   id_list(ids));
    std::cout << command << ": " << ids.size() << " parked row" << (ids.size() == 1 ? "" : "s") << '\n';
    return ids.empty() ? kExitFailure : kExitOk;
  });
}

}  // namespace

int cmd_status(const std::string& path, bool json) {
  const auto config = load_config_or_report(path);
  if (!config) return kExitConfig;
  auto connection = connect_for_command(*config, "status");
  if (!connection) return kExitFailure;
  pg::OutboxStore store(*connection, config->outbox.schema);
  auto report = store.status();
  if (!report) return database_failure("status", report.error(), *connection, *config);
  const auto& r = report.value();
  auto standby = standby_line(store, config->database.wait_for_standby);
  if (!standby) return database_failure("status", standby.error(), *connection, *config);
  const auto& line = standby.value();
  if (json) {
    nlohmann::json out = status_json(r);
    if (line) {
      out["standby"] = {{"waits_for", line->waits_for}, {"reports", line->behind.has_value()},
                        {"behind_bytes", line->behind ? nlohmann::json(*line->behind) : nlohmann::json()}};
    }
    print_json(out);
    return kExitOk;
  }
  std::printf("%-32s %9s %9s %9s %9s %9s %14s\n", "destination", "pending", "due", "scheduled", "retrying",
              "parked", "oldest due");
  for (const auto& d : r.destinations) print_row(d.destination, d);
  print_row("(total)", r.total);
  if (line && line->behind) {
    std::printf("standby %s: %lld bytes of WAL behind the primary\n", shown(line->waits_for).c_str(),
                static_cast<long long>(*line->behind));
  } else if (line) {
    std::printf("standby %s: does not report; outboxd publishes nothing until it does "
                "(database.wait_for_standby)\n", shown(line->waits_for).c_str());
  }
  return kExitOk;
}

// Each row changed gets a row_events entry with the database role and the OS user.
int cmd_requeue(const std::string& path, const AdminTarget& target) {
  return act_on_parked(path, target, "requeue", "pending again", &pg::OperatorActions::requeue);
}

int cmd_skip(const std::string& path, const AdminTarget& target) {
  return act_on_parked(path, target, "skip", "cancelled", &pg::OperatorActions::skip);
}

// Logged with who and when, as the database saw them: a timeout fired by
// hand is an event an operator may have to account for.
int cmd_fire(const std::string& path, const AdminTarget& target) {
  if (target.message_ids.empty() == target.session_id.empty()) {
    std::cerr << "fire: name message ids or --session S\n";
    return kExitUsage;
  }
  return run_operator_command(path, "fire", [&](OperatorCommand& s) {
    pg::OutboxStore store(s.connection, s.config.outbox.schema);
    std::vector<std::string> ids = target.message_ids;
    if (ids.empty()) ids.emplace_back();  // the session alone
    int fired = 0;
    for (const auto& id : ids) {
      auto report = store.fire(id, target.session_id, os_user(), target.writer);
      if (!report) return s.failed(report.error());
      const auto& r = report.value();
      fired += r.rows;
      if (r.rows == 0) continue;
      const std::string what = shown(id.empty() ? "session " + target.session_id : id, 200);
      spdlog::info("fire: {}: {} scheduled row{} due now", what, r.rows, r.rows == 1 ? "" : "s");
      std::cout << "fire: " << what << ": " << r.rows << " scheduled row" << (r.rows == 1 ? "" : "s")
                << " due now (" << shown(r.at) << ", by database role " << shown(r.by, 128) << ")\n";
    }
    std::cout << "fire: " << fired << " scheduled row" << (fired == 1 ? "" : "s") << '\n';
    return fired == 0 ? kExitFailure : kExitOk;
  });
}

}  // namespace outboxd::daemon
