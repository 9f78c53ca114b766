// outboxd entry point: parses the command line and runs one command.
#include <CLI/CLI.hpp>

#include <string>

#include "daemon/cli_operator.hpp"
#include "daemon/commands.hpp"

int main(int argc, char** argv) {
  using namespace outboxd::daemon;
  CLI::App app{"outboxd: publishes transactional-outbox rows from PostgreSQL over AMQP 1.0"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(OUTBOXD_VERSION));

  std::string config_path = "/etc/outboxd/outboxd.yaml";
  auto add_config = [&](CLI::App* cmd) {
    cmd->add_option("-c,--config", config_path, "YAML configuration file")->capture_default_str();
  };

  auto* version = app.add_subcommand("version", "print the version");
  auto* run = app.add_subcommand("run", "publish pending rows until SIGTERM");
  auto* check = app.add_subcommand("check-config", "validate the configuration file");
  auto* migrate = app.add_subcommand("migrate", "apply the SQL migrations");
  bool dry_run = false;
  migrate->add_flag("--dry-run", dry_run, "list what would be applied, change nothing");
  auto* status = app.add_subcommand("status", "show pending, due, scheduled and parked rows");
  bool json = false;
  status->add_flag("--json", json, "machine-readable output");
  auto* requeue = app.add_subcommand("requeue", "make parked rows pending again");
  auto* skip = app.add_subcommand("skip", "cancel parked rows so their sessions move on");
  auto* health = app.add_subcommand("healthcheck", "exit 0 if the running daemon's /healthz answers 200");
  auto* fire = app.add_subcommand("fire", "make scheduled rows due now");
  AdminTarget target;
  for (auto* cmd : {requeue, skip}) {
    cmd->add_option("message_id", target.message_ids, "message ids of parked rows");
    cmd->add_flag("--all-parked", target.all_parked, "every parked row");
    cmd->add_option("--session", target.session_id, "every parked row of this session");
  }
  fire->add_option("message_id", target.message_ids, "message ids of scheduled rows");
  fire->add_option("--session", target.session_id, "every scheduled row of this session");
  for (auto* cmd : {version, run, check, migrate, status, requeue, skip, health, fire}) add_config(cmd);
  OperatorCli operator_cli;
  operator_cli.add(app, add_config);

  CLI11_PARSE(app, argc, argv);

  if (*version) return cmd_version();
  if (*check) return cmd_check_config(config_path);
  if (*migrate) return cmd_migrate(config_path, dry_run);
  if (*status) return cmd_status(config_path, json);
  if (*requeue) return cmd_requeue(config_path, target);
  if (*skip) return cmd_skip(config_path, target);
  if (*health) return cmd_healthcheck(config_path);
  if (*fire) return cmd_fire(config_path, target);
  if (auto done = operator_cli.run(config_path)) return *done;
  return cmd_run(config_path);
}
