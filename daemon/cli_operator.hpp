// The command line of the operator's read and replay commands: parked, show, timeline, replay.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "daemon/commands.hpp"

namespace outboxd::daemon {

class OperatorCli {
 public:
  // Adds the subcommands to `app`; `add_config` gives each its -c option.
  template <class AddConfig>
  void add(CLI::App& app, AddConfig add_config) {
    add_commands(app);
    for (auto* cmd : {parked_, show_, timeline_, replay_}) add_config(cmd);
  }
  // The exit code of the subcommand that was given, or nullopt if none of these.
  std::optional<int> run(const std::string& config_path) const;

 private:
  void add_commands(CLI::App& app);
  void add_replay(CLI::App& app);

  CLI::App* parked_ = nullptr;
  CLI::App* show_ = nullptr;
  CLI::App* timeline_ = nullptr;
  CLI::App* replay_ = nullptr;
  ParkedOptions parked_options_;
  ReplayOptions replay_options_;
  std::string message_id_;
  std::string session_id_;
  int timeline_limit_ = 1000;
  bool json_ = false;
};

}  // namespace outboxd::daemon
