// The CLI commands, one function each; the return value is the process exit code.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace outboxd::daemon {

// Exit codes. 78 (EX_CONFIG) tells systemd not to restart a misconfigured unit.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitConfig = 78;

// Which rows `requeue` and `skip` (parked rows) and `fire` (scheduled rows) act on.
struct AdminTarget {
  std::vector<std::string> message_ids;
  std::string session_id;
  bool all_parked = false;
};

int cmd_version();
int cmd_check_config(const std::string& path);
int cmd_migrate(const std::string& path, bool dry_run);
int cmd_status(const std::string& path, bool json);
int cmd_requeue(const std::string& path, const AdminTarget& target);
int cmd_skip(const std::string& path, const AdminTarget& target);
int cmd_fire(const std::string& path, const AdminTarget& target);
int cmd_run(const std::string& path);
int cmd_healthcheck(const std::string& path);

}  // namespace outboxd::daemon
