// `outboxd requeue`, `skip` and `fire`: operator actions on the outbox.
#include <iostream>

#include <spdlog/spdlog.h>

#include "daemon/operator/operator_command.hpp"
#include "daemon/commands.hpp"
#include "daemon/operator_text.hpp"
#include "pg/operator_actions.hpp"
#include "pg/outbox_store.hpp"

namespace outboxd::daemon {

namespace {

using ParkedAction = core::Result<std::vector<std::string>> (pg::OperatorActions::*)(const pg::ParkedTarget&);

// Runs requeue or skip on the target rows in one statement; returns the exit code.
int act_on_parked(const ConfigChoice& choice, const AdminTarget& target, const char* command, const char* done,
                  ParkedAction action) {
  if (target.message_ids.empty() && !target.all_parked && target.session_id.empty()) {
    std::cerr << command << ": name message ids, --session S or --all-parked\n";
    return kExitUsage;
  }
  return run_operator_command(choice, command, [&](OperatorCommand& s) {
    pg::OperatorActions actions(s.connection, s.config.outbox.schema, os_user());
    auto changed = (actions.*action)({target.message_ids, target.session_id, target.all_parked, target.writer});
    if (!changed) return s.failed(changed.error());
    const auto& ids = changed.value();
    if (!ids.empty()) spdlog::info("{}: {} parked row{} {}: {}", command, ids.size(), ids.size() == 1 ? "" : "s", done,
                                   id_list(ids));
    std::cout << command << ": " << ids.size() << " parked row" << (ids.size() == 1 ? "" : "s") << '\n';
    return ids.empty() ? kExitFailure : kExitOk;
  });
}

}  // namespace

// Each row changed gets a row_events entry with the database role and the OS user.
int cmd_requeue(const ConfigChoice& choice, const AdminTarget& target) {
  return act_on_parked(choice, target, "requeue", "pending again", &pg::OperatorActions::requeue);
}

int cmd_skip(const ConfigChoice& choice, const AdminTarget& target) {
  return act_on_parked(choice, target, "skip", "cancelled", &pg::OperatorActions::skip);
}

// Logged with who and when, as the database saw them: a timeout fired by
// hand is an event an operator may have to account for.
int cmd_fire(const ConfigChoice& choice, const AdminTarget& target) {
  if (target.message_ids.empty() == target.session_id.empty()) {
    std::cerr << "fire: name message ids or --session S\n";
    return kExitUsage;
  }
  return run_operator_command(choice, "fire", [&](OperatorCommand& s) {
    pg::OutboxStore store(s.connection, s.config.outbox.schema);
    std::vector<std::string> ids = target.message_ids;
    if (ids.empty()) ids.emplace_back();  // the session alone
    int fired = 0;
    for (const auto& id : ids) {
      auto report = store.fire(id, target.session_id, os_user(), target.writer);
      if (!report) return s.failed(report.error());
      const auto& r = report.value();
      fired += r.rows;
      if (r.rows == 0) continue;
      const std::string what = shown(id.empty() ? "session " + target.session_id : id, 200);
      spdlog::info("fire: {}: {} scheduled row{} due now", what, r.rows, r.rows == 1 ? "" : "s");
      std::cout << "fire: " << what << ": " << r.rows << " scheduled row" << (r.rows == 1 ? "" : "s")
                << " due now (" << shown(r.at) << ", by database role " << shown(r.by, 128) << ")\n";
    }
    std::cout << "fire: " << fired << " scheduled row" << (fired == 1 ? "" : "s") << '\n';
    return fired == 0 ? kExitFailure : kExitOk;
  });
}

}  // namespace outboxd::daemon
