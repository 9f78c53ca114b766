// Set-up of the operator commands: config, logger, connection; and the OS user they record.
#include "daemon/operator/operator_command.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

#include "core/safe_text.hpp"
#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"

namespace outboxd::daemon {

int OperatorCommand::failed(const core::Error& error) { return database_failure(command, error, connection, config); }

int run_operator_command(const ConfigChoice& choice, const char* command,
                         const std::function<int(OperatorCommand&)>& body) {
  auto chosen = one_outbox_config(choice, command);
  if (!chosen.config) return chosen.exit_code;
  auto& config = *chosen.config;
  if (!init_logging(config)) return kExitConfig;
  auto connection = connect_for_command(config, command);
  if (!connection) return kExitFailure;
  OperatorCommand run{command, std::move(config), std::move(*connection)};
  return body(run);
}

// row_events.os_user takes 1..128 characters without control characters.
std::string os_user() {
  if (const char* sudo = std::getenv("SUDO_USER"); sudo != nullptr && *sudo != '\0') return core::safe_text(sudo, 128);
  if (const passwd* entry = ::getpwuid(::getuid()); entry != nullptr && entry->pw_name != nullptr) {
    return core::safe_text(entry->pw_name, 128);
  }
  return {};
}

}  // namespace outboxd::daemon
