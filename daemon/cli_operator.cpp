// Options of `outboxd parked`, `show`, `timeline` and `replay`, and which command runs.
#include "daemon/cli_operator.hpp"

namespace outboxd::daemon {

void OperatorCli::add_commands(CLI::App& app) {
  parked_ = app.add_subcommand("parked", "list parked rows: why, since when, what waits behind them");
  parked_->add_flag("--retrying", parked_options_.retrying, "also pending rows with failed attempts");
  parked_->add_option("--destination", parked_options_.destination, "only rows of this destination");
  parked_->add_option("--session", parked_options_.session_id, "only rows of this session");
  parked_->add_option("--older-than", parked_options_.older_than, "first failed longer ago than this (10m, 2h, 7d)");
  parked_->add_option("--limit", parked_options_.limit, "at most this many rows")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  parked_->add_flag("--json", parked_options_.json, "machine-readable output");

  show_ = app.add_subcommand("show", "one row's whole state and history");
  show_->add_option("message_id", message_id_, "the row's message id")->required();
  show_->add_flag("--json", json_, "machine-readable output");

  timeline_ = app.add_subcommand("timeline", "every row of a session in order, and its workflow state");
  timeline_->add_option("session", session_id_, "the session id")->required();
  timeline_->add_option("--limit", timeline_limit_, "at most this many rows")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  timeline_->add_flag("--json", json_, "machine-readable output");
  add_replay(app);
}

void OperatorCli::add_replay(CLI::App& app) {
  replay_ = app.add_subcommand("replay", "send dispatched rows again (retention keep), same message ids, in order");
  auto& o = replay_options_;
  replay_->add_option("--message-id", o.message_ids, "rows with these message ids");
  replay_->add_option("--session", o.session_id, "rows of this session");
  replay_->add_option("--destination", o.destination, "rows of this destination");
  replay_->add_option("--since", o.since, "dispatched at or after: a time (2026-12-01T13:00Z) or a span ago (2h)");
  replay_->add_option("--until", o.until, "dispatched before: a time or a span ago");
  replay_->add_option("--limit", o.limit, "refuse if more rows than this match")
      ->capture_default_str()->check(CLI::Range(1, 1000000));
  replay_->add_flag("--dry-run", o.dry_run, "say how many rows it would replay, change nothing");
  replay_->add_flag("--yes", o.yes, "replay them (without it, a dry run that exits 2)");
}

std::optional<int> OperatorCli::run(const std::string& config_path) const {
  if (*parked_) return cmd_parked(config_path, parked_options_);
  if (*show_) return cmd_show(config_path, message_id_, json_);
  if (*timeline_) return cmd_timeline(config_path, session_id_, timeline_limit_, json_);
  if (*replay_) return cmd_replay(config_path, replay_options_);
  return std::nullopt;
}

}  // namespace outboxd::daemon
