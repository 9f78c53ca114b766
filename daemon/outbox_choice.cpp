// Choosing the outbox of a command: --outbox against the list and the catalog, or all of them for migrate and status.
#include "daemon/outbox_choice.hpp"

#include <algorithm>
#include <iostream>

#include "config/outboxes.hpp"
#include "config/url.hpp"
#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "daemon/operator_text.hpp"
#include "pg/outbox_catalog.hpp"

namespace outboxd::daemon {
namespace {

const config::OutboxEntry* named(const std::vector<config::OutboxEntry>& entries, const std::string& name) {
  const auto found = std::find_if(entries.begin(), entries.end(),
                                  [&](const config::OutboxEntry& entry) { return entry.name == name; });
  return found == entries.end() ? nullptr : &*found;
}

OneOutbox refuse(const char* command, const std::string& why) {
  std::cerr << command << ": " << why << '\n';
  return {std::nullopt, kExitUsage};
}

}  // namespace

OneOutbox choose_outbox(const config::Config& config, const ConfigChoice& choice, const char* command) {
  if (!config.many_outboxes()) {
    if (choice.outbox.empty()) return {config, kExitOk};
    return refuse(command, "--outbox is for a file with many outboxes (outboxes: or tenants.catalog.query); " +
                               choice.path + " has the one of database: and outbox:");
  }
  // A listed outbox wins over the catalog's of its name: no need to read the catalog for it.
  if (const auto* listed = named(config.outboxes, choice.outbox)) return {config::for_outbox(config, *listed), kExitOk};
  const AllOutboxes all = all_outboxes(config, command);
  const std::string choices = all.entries.empty() ? "none found" : config::name_list(all.entries);
  if (choice.outbox.empty()) {
    return refuse(command, choice.path + " has many outboxes: name one with --outbox NAME (" + choices + ")");
  }
  if (const auto* found = named(all.entries, choice.outbox)) return {config::for_outbox(config, *found), kExitOk};
  return refuse(command, "no outbox is named \"" + shown(choice.outbox, 80) + "\" (" + choices + ")");
}

OneOutbox one_outbox_config(const ConfigChoice& choice, const char* command) {
  const auto config = load_config_or_report(choice.path);
  if (!config) return {std::nullopt, kExitConfig};
  return choose_outbox(*config, choice, command);
}

AllOutboxes all_outboxes(const config::Config& config, const char* command) {
  AllOutboxes all;
  std::optional<pg::Connection> catalog;
  if (!config.tenants.catalog.query.empty()) {
    catalog = connect_for_command(config.tenants.catalog.database, (std::string(command) + " catalog").c_str());
    all.complete = catalog.has_value();
  }
  auto resolved = pg::resolve_outboxes(config, catalog ? &*catalog : nullptr);
  if (!resolved) {
    std::cerr << command << ": " << resolved.error().message << '\n';
    resolved = pg::resolve_outboxes(config, nullptr);
    all.complete = false;
  }
  for (const auto& problem : resolved.value().problems) std::cerr << command << ": " << shown(problem, 400) << '\n';
  if (!all.complete) std::cerr << command << ": the catalog could not be read: its outboxes are left out\n";
  all.entries = std::move(resolved.value().entries);
  return all;
}

std::string outbox_heading(const config::OutboxEntry& entry) {
  return entry.name + " (" + shown(config::describe(entry.database.target), 200) + ", schema " + entry.outbox.schema +
         ")";
}

}  // namespace outboxd::daemon
