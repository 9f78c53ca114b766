// `outboxd statements`: the SQL `outboxd run` prepares, for a reviewer or a DBA to read whole.
#include <iostream>

#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "pg/lease_store.hpp"
#include "pg/outbox_store.hpp"
#include "pg/watch_store.hpp"

namespace outboxd::daemon {

// Each statement under its prepared name, as pg_stat_statements and the
// server log show it, for the configured outbox schema; no connection made.
int cmd_statements(const std::string& path) {
  const auto config = load_config_or_report(path);
  if (!config) return kExitConfig;
  for (const auto& statements : {pg::OutboxStore::statements(config->outbox.schema),
                                 pg::LeaseStore::statements(config->outbox.schema),
                                 pg::WatchStore::statements(config->outbox.schema)}) {
    for (const auto& [name, text] : statements) std::cout << "-- " << name << '\n' << text << ";\n\n";
  }
  return kExitOk;
}

}  // namespace outboxd::daemon
