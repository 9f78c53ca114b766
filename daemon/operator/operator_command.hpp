// A one-shot database command's set-up, shared by the operator commands: config, logging, connection, and who runs it.
#pragma once

#include <functional>
#include <string>

#include "config/config.hpp"
#include "core/result.hpp"
#include "daemon/outbox_choice.hpp"
#include "pg/connection.hpp"

namespace outboxd::daemon {

// One run of an operator command: its name, its config and its database connection.
struct OperatorCommand {
  const char* command;
  config::Config config;
  pg::Connection connection;

  // database_failure() for this command: prints why, returns the exit code.
  int failed(const core::Error& error);
};

// Loads the config (exit 78 on errors) of the one outbox chosen (exit 2
// when none is: choose_outbox()), sets up the stderr logger, connects (exit
// 1 if it cannot) and returns what `body` returns.
int run_operator_command(const ConfigChoice& choice, const char* command,
                         const std::function<int(OperatorCommand&)>& body);

// The operating-system user running the command, recorded beside the
// database role in row_events: $SUDO_USER when run through sudo, else the
// login name of the real user id; empty when neither is known. Informational:
// the database role is what the database vouches for.
std::string os_user();

}  // namespace outboxd::daemon
