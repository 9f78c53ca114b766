// `outboxd status [--json]`: the rows waiting per destination, of the one outbox or, with many, of every one.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "config/outboxes.hpp"
#include "config/url.hpp"
#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "daemon/operator_text.hpp"
#include "pg/migrator.hpp"
#include "pg/outbox_store.hpp"
#include "pg/privileges.hpp"

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

// What status shows of one outbox.
struct OutboxStatus {
  pg::StatusReport report;
  std::optional<StandbyLine> standby;
  nlohmann::json policy;  // policy_json() of the daemon's destinations:
};

// "priority 10, max_rate 200/s (burst 20), max_in_flight 50": what is set, from policy_json().
std::string policy_text(const nlohmann::json& item) {
  std::vector<std::string> parts;
  if (item["priority"] != 0) parts.push_back(fmt::format("priority {}", item["priority"].get<int>()));
  if (item["max_rate"] != 0) {
    parts.push_back(fmt::format("max_rate {}/s (burst {})", item["max_rate"].get<double>(), item["burst"].get<double>()));
  }
  if (item["max_in_flight"] != 0) parts.push_back(fmt::format("max_in_flight {}", item["max_in_flight"].get<int>()));
  return fmt::format("{}", fmt::join(parts, ", "));
}

core::Result<OutboxStatus> read_status(pg::Connection& connection, const config::Config& config) {
  pg::OutboxStore store(connection, config.outbox.schema);
  auto report = store.status();
  if (!report) return report.error();
  auto standby = standby_line(store, config.database.wait_for_standby);
  if (!standby) return standby.error();
  return OutboxStatus{std::move(report).value(), std::move(standby).value(), policy_json(config.destinations)};
}

nlohmann::json status_document(const OutboxStatus& status) {
  nlohmann::json out = status_json(status.report);
  if (const auto& line = status.standby) {
    out["standby"] = {{"waits_for", line->waits_for}, {"reports", line->behind.has_value()},
                      {"behind_bytes", line->behind ? nlohmann::json(*line->behind) : nlohmann::json()}};
  }
  out["policy"] = status.policy;
  return out;
}

void print_status(const OutboxStatus& status) {
  std::printf("%-32s %9s %9s %9s %9s %9s %14s\n", "destination", "pending", "due", "scheduled", "retrying",
              "parked", "oldest due");
  for (const auto& d : status.report.destinations) print_row(d.destination, d);
  print_row("(total)", status.report.total);
  if (!status.policy.empty()) std::printf("delivery policy (destinations:):\n");
  for (const auto& item : status.policy) {
    std::printf("  %s: %s\n", shown(item["destination"].get<std::string>(), core::kSafeTextMaxBytes).c_str(),
                policy_text(item).c_str());
  }
  const auto& line = status.standby;
  if (line && line->behind) {
    std::printf("standby %s: %lld bytes of WAL behind the primary\n", shown(line->waits_for).c_str(),
                static_cast<long long>(*line->behind));
  } else if (line) {
    std::printf("standby %s: does not report; outboxd publishes nothing until it does "
                "(database.wait_for_standby)\n", shown(line->waits_for).c_str());
  }
}

int status_of_one(const config::Config& config, bool json) {
  auto connection = connect_for_command(config, "status");
  if (!connection) return kExitFailure;
  auto status = read_status(*connection, config);
  if (!status) return database_failure("status", status.error(), *connection, config);
  if (json) print_json(status_document(status.value()));
  else print_status(status.value());
  return kExitOk;
}

// One outbox of many: its status, or its state and why not ("unreachable",
// "not_migrated", "failed"), so that one outbox down hides none of the others.
struct Survey {
  std::optional<OutboxStatus> status;
  std::string state = "ok";
  std::string reason;
};

Survey failed(pg::Connection& connection, const config::Config& one, const core::Error& error) {
  std::string reason = error.message;
  if (error.kind == core::ErrorKind::forbidden) {
    reason += "; " + pg::dispatcher_privilege_fix(connection, one.outbox.schema);
  }
  return {std::nullopt, "failed", reason};
}

Survey survey(const config::Config& one, const std::string& name) {
  auto connection = pg::Connection::open(one.database, "outboxd status " + name);
  if (!connection) {
    return {std::nullopt, "unreachable",
            "cannot connect to " + config::describe(one.database.target) + ": " + connection.error().message};
  }
  auto& c = connection.value();
  auto version = pg::applied_version(c, one.outbox.schema);
  if (!version) return failed(c, one, version.error());
  if (!version.value()) {
    auto installed = pg::outbox_installed(c, one.outbox.schema);
    if (!installed) return failed(c, one, installed.error());
    if (!installed.value()) {
      return {std::nullopt, "not_migrated", "schema " + one.outbox.schema + " has no outbox: run outboxd migrate"};
    }
  }
  auto status = read_status(c, one);
  if (!status) return failed(c, one, status.error());
  return {std::move(status).value(), "ok", ""};
}

int status_of_all(const config::Config& config, bool json) {
  const AllOutboxes all = all_outboxes(config, "status");
  nlohmann::json outboxes = nlohmann::json::object();
  bool every_one = all.complete;
  for (const auto& entry : all.entries) {
    const Survey found = survey(config::for_outbox(config, entry), entry.name);
    every_one = every_one && found.status.has_value();
    if (json) {
      nlohmann::json item = found.status ? status_document(*found.status) : nlohmann::json{{"reason", found.reason}};
      item["state"] = found.state;
      item["database"] = config::describe(entry.database.target);
      item["schema"] = entry.outbox.schema;
      outboxes[entry.name] = std::move(item);
    } else if (found.status) {
      std::cout << "outbox " << outbox_heading(entry) << '\n';
      print_status(*found.status);
      std::cout << '\n';
    } else {
      std::cout << "outbox " << outbox_heading(entry) << ": " << found.state << ": " << shown(found.reason, 400)
                << "\n\n";
    }
  }
  if (json) print_json({{"outboxes", outboxes}, {"complete", all.complete}});
  return every_one ? kExitOk : kExitFailure;
}

}  // namespace

int cmd_status(const ConfigChoice& choice, bool json) {
  const auto config = load_config_or_report(choice.path);
  if (!config) return kExitConfig;
  if (config->many_outboxes() && choice.outbox.empty()) return status_of_all(*config, json);
  const auto one = choose_outbox(*config, choice, "status");
  if (!one.config) return one.exit_code;
  return status_of_one(*one.config, json);
}

}  // namespace outboxd::daemon
