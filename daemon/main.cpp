// outboxd entry point: the command table, the options every command shares, then the one command asked for.
#include <CLI/CLI.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "daemon/commands.hpp"

namespace {

using namespace outboxd::daemon;

// What the command line sets, for whichever command runs.
struct Options {
  std::string config_path = "/etc/outboxd/outboxd.yaml";
  std::string outbox;  // --outbox: with many outboxes, the one a command acts on
  bool dry_run = false;
  std::string legacy_writer;
  bool json = false;
  AdminTarget target;
  ParkedOptions parked;
  ReplayOptions replay;
  std::string message_id;
  std::string writer;  // of `show`
  TimelineOptions timeline;
  std::string console_listen;
};

void no_options(CLI::App&, Options&) {}

void migrate_options(CLI::App& cmd, Options& options) {
  cmd.add_flag("--dry-run", options.dry_run, "list what would be applied, change nothing");
  cmd.add_option("--legacy-writer", options.legacy_writer,
                 "the login role that wrote the inbox and workflow rows written before writers were kept apart "
                 "(migration 023; needed only when such rows exist)");
}

void json_flag(CLI::App& cmd, Options& options) { cmd.add_flag("--json", options.json, "machine-readable output"); }

// Message ids and sessions are each writer's own.
void writer_option(CLI::App& cmd, std::string& writer) {
  cmd.add_option("--writer", writer,
                 "only rows of this writer (login role); needed when an id or session names rows of several");
}

void parked_rows(CLI::App& cmd, Options& options) {
  cmd.add_option("message_id", options.target.message_ids, "message ids of parked rows");
  cmd.add_flag("--all-parked", options.target.all_parked, "every parked row");
  cmd.add_option("--session", options.target.session_id, "every parked row of this session");
  writer_option(cmd, options.target.writer);
}

void scheduled_rows(CLI::App& cmd, Options& options) {
  cmd.add_option("message_id", options.target.message_ids, "message ids of scheduled rows");
  cmd.add_option("--session", options.target.session_id, "every scheduled row of this session");
  writer_option(cmd, options.target.writer);
}

void parked_filters(CLI::App& cmd, Options& options) {
  auto& o = options.parked;
  cmd.add_flag("--retrying", o.retrying, "also pending rows with failed attempts");
  cmd.add_option("--destination", o.destination, "only rows of this destination");
  cmd.add_option("--session", o.session_id, "only rows of this session");
  cmd.add_option("--older-than", o.older_than, "first failed longer ago than this (10m, 2h, 7d)");
  cmd.add_option("--limit", o.limit, "at most this many rows")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd.add_flag("--json", o.json, "machine-readable output");
}

void one_row(CLI::App& cmd, Options& options) {
  cmd.add_option("message_id", options.message_id, "the row's message id")->required();
  writer_option(cmd, options.writer);
  json_flag(cmd, options);
}

// A session, or a conversation: one of the two.
void timeline_options(CLI::App& cmd, Options& options) {
  auto& o = options.timeline;
  auto* subject = cmd.add_option_group("subject", "a session id or --correlation, one of them");
  subject->add_option("session", o.session_id, "the session id");
  subject->add_option("--correlation", o.correlation_id,
                      "the conversation of this correlation id instead: its rows across sessions and destinations, "
                      "their events and inbox receipts, its workflow state records");
  subject->require_option(1);
  cmd.add_option("--limit", o.limit, "at most this many rows (of a conversation: the newest)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--before", o.before, "with --correlation: the rows below this row id (the \"more\" of a page)")
      ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()));
  cmd.add_flag("--json", o.json, "machine-readable output");
}

void replay_selection(CLI::App& cmd, Options& options) {
  auto& o = options.replay;
  cmd.add_option("--message-id", o.message_ids, "rows with these message ids");
  cmd.add_option("--session", o.session_id, "rows of this session");
  cmd.add_option("--destination", o.destination, "rows of this destination");
  writer_option(cmd, o.writer);
  cmd.add_option("--since", o.since, "dispatched at or after: a time (2026-12-01T13:00Z) or a span ago (2h)");
  cmd.add_option("--until", o.until, "dispatched before: a time or a span ago");
  cmd.add_option("--limit", o.limit, "refuse if more rows than this match")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd.add_flag("--dry-run", o.dry_run, "say how many rows it would replay, change nothing");
  cmd.add_flag("--yes", o.yes, "replay them (without it, a dry run that exits 2)");
}

void console_options(CLI::App& cmd, Options& options) {
  cmd.add_option("--listen", options.console_listen, "host:port to serve on (default: console.listen, 127.0.0.1:9189)");
}

ConfigChoice choice(const Options& options) { return {options.config_path, options.outbox}; }

// What a command acts on: the file or the daemon (version, run, check-config,
// healthcheck), or an outbox's database, which with many outboxes --outbox names.
enum class Scope { file, outbox };
constexpr auto kFile = Scope::file;
constexpr auto kOutbox = Scope::outbox;

struct Command {
  const char* name;
  const char* help;
  void (*add_options)(CLI::App&, Options&);
  Scope scope;
  int (*run)(const Options&);
};

// In the order `outboxd --help` lists them.
constexpr std::array kCommands{
    Command{"version", "print the version", no_options, kFile, [](const Options&) { return cmd_version(); }},
    Command{"run", "publish pending rows until SIGTERM", no_options, kFile,
            [](const Options& o) { return cmd_run(o.config_path); }},
    Command{"check-config", "validate the configuration file", no_options, kFile,
            [](const Options& o) { return cmd_check_config(o.config_path); }},
    Command{"migrate", "apply the SQL migrations (with many outboxes: to each, or the one --outbox names)",
            migrate_options, kOutbox,
            [](const Options& o) { return cmd_migrate(choice(o), o.dry_run, o.legacy_writer); }},
    Command{"status", "show pending, due, scheduled and parked rows (with many outboxes: of each)", json_flag,
            kOutbox, [](const Options& o) { return cmd_status(choice(o), o.json); }},
    Command{"requeue", "make parked rows pending again", parked_rows, kOutbox,
            [](const Options& o) { return cmd_requeue(choice(o), o.target); }},
    Command{"skip", "cancel parked rows so their sessions move on", parked_rows, kOutbox,
            [](const Options& o) { return cmd_skip(choice(o), o.target); }},
    Command{"healthcheck", "exit 0 if the running daemon's /healthz answers 200", no_options, kFile,
            [](const Options& o) { return cmd_healthcheck(o.config_path); }},
    Command{"fire", "make scheduled rows due now", scheduled_rows, kOutbox,
            [](const Options& o) { return cmd_fire(choice(o), o.target); }},
    Command{"parked", "list parked rows: why, since when, what waits behind them", parked_filters, kOutbox,
            [](const Options& o) { return cmd_parked(choice(o), o.parked); }},
    Command{"show", "one row's whole state and history", one_row, kOutbox,
            [](const Options& o) { return cmd_show(choice(o), o.message_id, o.writer, o.json); }},
    Command{"timeline", "every row of a session, or of a conversation (--correlation), in order, and its workflow state",
            timeline_options, kOutbox, [](const Options& o) { return cmd_timeline(choice(o), o.timeline); }},
    Command{"replay", "send dispatched rows again (retention keep), same message ids, in order", replay_selection,
            kOutbox, [](const Options& o) { return cmd_replay(choice(o), o.replay); }},
    Command{"console", "serve the operators' web view: backlog, parked rows, timelines, audit trail",
            console_options, kOutbox, [](const Options& o) { return cmd_console(choice(o), o.console_listen); }},
    Command{"statements", "print the SQL statements `run` prepares, for the configured schema", no_options, kOutbox,
            [](const Options& o) { return cmd_statements(choice(o)); }},
};

// One subcommand per table row, each with its own options and then the config file every command reads.
std::vector<CLI::App*> add_commands(CLI::App& app, Options& options) {
  std::vector<CLI::App*> subcommands;
  for (const Command& command : kCommands) {
    CLI::App* cmd = app.add_subcommand(command.name, command.help);
    command.add_options(*cmd, options);
    cmd->add_option("-c,--config", options.config_path, "YAML configuration file")->capture_default_str();
    if (command.scope == kOutbox) {
      cmd->add_option("--outbox", options.outbox, "with many outboxes (outboxes:, tenants.catalog): the one to act on");
    }
    subcommands.push_back(cmd);
  }
  return subcommands;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"outboxd: publishes transactional-outbox rows from PostgreSQL over AMQP 1.0"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(OUTBOXD_VERSION));
  Options options;
  const std::vector<CLI::App*> subcommands = add_commands(app, options);

  CLI11_PARSE(app, argc, argv);

  for (std::size_t i = 0; i < kCommands.size(); ++i) {
    if (*subcommands[i]) return kCommands[i].run(options);
  }
  return kExitUsage;  // not reached: CLI11 requires exactly one subcommand
}
