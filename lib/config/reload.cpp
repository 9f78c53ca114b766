// A reload: each row of the key table compared, each change applied at run time or left for a restart.
#include "config/reload.hpp"

#include "config/key_table.hpp"

namespace outboxd::config {
namespace {

// A key of a nested section (broker.tls.ca_file) is reported as its section
// (broker.tls): the section is taken as a whole, at start.
std::string reported_path(const std::string& path) {
  const auto first = path.find('.');
  const auto second = first == std::string::npos ? std::string::npos : path.find('.', first + 1);
  return second == std::string::npos ? path : path.substr(0, second);
}

void note(std::vector<std::string>& paths, const std::string& path) {
  const std::string reported = reported_path(path);
  if (paths.empty() || paths.back() != reported) paths.push_back(reported);
}

// In the many-outbox form database: and outbox: are the defaults of every
// outbox, which the daemon builds again from the list and the catalog on
// SIGHUP: a change to them is a change of outboxes, applied with the list.
bool default_of_outboxes(const std::string& path) {
  return path.starts_with("database.") || path.starts_with("outbox.");
}

}  // namespace

ReloadPlan plan_reload(const Config& running, const Config& loaded) {
  ReloadPlan plan{running, {}, {}};
  const bool many = running.many_outboxes() && loaded.many_outboxes();
  for (const auto& key : key_table()) {
    Change change = key.compare(running, loaded);
    if (many && change != Change::none && default_of_outboxes(key.path)) change = Change::applied;
    switch (change) {
      case Change::none: break;
      case Change::applied:
        key.adopt(plan.config, loaded);
        note(plan.applied, key.path);
        break;
      case Change::needs_restart: note(plan.needs_restart, key.path); break;
    }
  }
  if (many) {
    // Whole: the rows of inline passwords adopt nothing.
    plan.config.database = loaded.database;
    plan.config.outbox = loaded.outbox;
  }
  return plan;
}

std::vector<std::string> reload_key_paths() {
  std::vector<std::string> paths;
  for (const auto& key : key_table()) paths.push_back(key.path);
  return paths;
}

}  // namespace outboxd::config
