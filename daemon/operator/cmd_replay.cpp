// `outboxd replay`: dispatched rows (retention keep) sent again with their message ids, in session order, on purpose only.
#include <iostream>

#include <spdlog/spdlog.h>

#include "daemon/operator/operator_command.hpp"
#include "daemon/commands.hpp"
#include "daemon/operator/duration_text.hpp"
#include "daemon/operator_text.hpp"
#include "pg/operator_actions.hpp"

namespace outboxd::daemon {
namespace {

// A duration counts back from the database's now(); anything else is a time for PostgreSQL to read.
pg::TimeBound bound_of(const std::string& text) {
  if (text.empty()) return {};
  if (auto ago = parse_duration(text)) return {std::nullopt, ago};
  return {text, std::nullopt};
}

std::string rows(std::int64_t count) { return std::to_string(count) + (count == 1 ? " row" : " rows"); }

int report_nothing(const config::Config& config) {
  std::cout << "replay: no dispatched row matches";
  if (config.retention.mode == config::RetentionMode::delete_rows) {
    std::cout << " (retention.mode is delete: rows are deleted once dispatched, so there is nothing to replay)";
  }
  std::cout << '\n';
  return kExitFailure;
}

// A dry run, asked for or standing in for a missing --yes: says what would happen, changes nothing.
int report_dry_run(const pg::ReplayReport& r, const ReplayOptions& options) {
  std::cout << "replay: " << rows(r.matched) << " would be sent again: " << id_list(r.message_ids) << '\n';
  if (r.waiting_behind > 0) {
    std::cout << "replay: later pending rows of their sessions that would wait behind them: " << r.waiting_behind
              << '\n';
  }
  if (r.matched > options.limit) {
    std::cout << "replay: more than --limit " << options.limit << ": narrow the selection or raise --limit\n";
  }
  if (options.dry_run) {
    std::cout << "replay: dry run, nothing changed\n";
    return kExitOk;
  }
  std::cout << "replay: nothing changed; run again with --yes to replay them\n";
  return kExitUsage;
}

int report_replayed(const pg::ReplayReport& r) {
  const auto count = static_cast<std::int64_t>(r.message_ids.size());
  spdlog::info("replay: {} pending again, due now: {}", rows(count), id_list(r.message_ids));
  std::cout << "replay: " << rows(count) << " pending again, due now: " << id_list(r.message_ids) << '\n';
  if (r.waiting_behind > 0) {
    std::cout << "replay: later pending rows of their sessions that wait behind them: " << r.waiting_behind << '\n';
  }
  return kExitOk;
}

}  // namespace

int cmd_replay(const ConfigChoice& choice, const ReplayOptions& options) {
  if (options.message_ids.empty() && options.session_id.empty() && options.destination.empty()) {
    std::cerr << "replay: name message ids, --session S or --destination D (with --since/--until)\n";
    return kExitUsage;
  }
  const pg::ReplaySelection selection{options.message_ids,     options.session_id,      options.destination,
                                      options.writer,          bound_of(options.since), bound_of(options.until),
                                      options.limit};
  return run_operator_command(choice, "replay", [&](OperatorCommand& s) {
    pg::OperatorActions actions(s.connection, s.config.outbox.schema, os_user());
    const bool dry_run = options.dry_run || !options.yes;
    auto report = actions.replay(selection, dry_run);
    if (!report) return s.failed(report.error());
    if (report.value().matched == 0) return report_nothing(s.config);
    return dry_run ? report_dry_run(report.value(), options) : report_replayed(report.value());
  });
}

}  // namespace outboxd::daemon
