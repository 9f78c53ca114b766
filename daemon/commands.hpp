// The CLI commands, one function each; the return value is the process exit code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/outbox_choice.hpp"

namespace outboxd::daemon {

// Exit codes. 78 (EX_CONFIG) tells systemd not to restart a misconfigured unit.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitConfig = 78;

// Which rows `requeue` and `skip` (parked rows) and `fire` (scheduled rows) act on.
// A message id or session that names rows of more than one writer needs the writer.
struct AdminTarget {
  std::vector<std::string> message_ids;
  std::string session_id;
  bool all_parked = false;
  std::string writer;  // empty: any
};

// `outboxd parked`: failed rows, optionally filtered.
struct ParkedOptions {
  bool retrying = false;
  std::string destination;
  std::string session_id;
  std::string older_than;  // a duration: 10m, 2h
  int limit = 100;
  bool json = false;
};

// `outboxd replay`: which dispatched rows to send again, and how sure the operator is.
struct ReplayOptions {
  std::vector<std::string> message_ids;
  std::string session_id;
  std::string destination;
  std::string writer;  // empty: any
  std::string since;  // a duration before now (2h) or a time PostgreSQL reads
  std::string until;
  int limit = 1000;
  bool dry_run = false;
  bool yes = false;
};

// `outboxd timeline`: one session's rows, or one conversation's (--correlation).
struct TimelineOptions {
  std::string session_id;
  std::string correlation_id;
  int limit = 1000;
  std::int64_t before = 0;  // a conversation's rows below this id (0: the newest)
  bool json = false;
};

int cmd_version();
int cmd_check_config(const std::string& path);
// With many outboxes and no --outbox, migrate and status go through every one.
int cmd_migrate(const ConfigChoice& choice, bool dry_run, const std::string& legacy_writer);
int cmd_status(const ConfigChoice& choice, bool json);
// The others act on one outbox: with many, the one --outbox names.
int cmd_requeue(const ConfigChoice& choice, const AdminTarget& target);
int cmd_skip(const ConfigChoice& choice, const AdminTarget& target);
int cmd_fire(const ConfigChoice& choice, const AdminTarget& target);
int cmd_parked(const ConfigChoice& choice, const ParkedOptions& options);
int cmd_show(const ConfigChoice& choice, const std::string& message_id, const std::string& writer, bool json);
int cmd_timeline(const ConfigChoice& choice, const TimelineOptions& options);
int cmd_replay(const ConfigChoice& choice, const ReplayOptions& options);
int cmd_run(const std::string& path);
int cmd_healthcheck(const std::string& path);
// With many outboxes and no --outbox, the console serves every one: their list at /, each under /o/<name>/.
int cmd_console(const ConfigChoice& choice, const std::string& listen);
int cmd_statements(const ConfigChoice& choice);

}  // namespace outboxd::daemon
