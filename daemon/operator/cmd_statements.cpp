// `outboxd statements`: the SQL `outboxd run` prepares, for a reviewer or a DBA to read whole.
#include <iostream>

#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "pg/lease_store.hpp"
#include "pg/outbox_store.hpp"
#include "pg/watch_store.hpp"

namespace outboxd::daemon {

// Each statement under its prepared name, as pg_stat_statements and the
// server log show it, for the configured outbox schema; no connection made
// (but to the catalog, for an outbox --outbox names that is not listed).
int cmd_statements(const ConfigChoice& choice) {
  const auto chosen = one_outbox_config(choice, "statements");
  const auto& config = chosen.config;
  if (!config) return chosen.exit_code;
  for (const auto& statements : {pg::OutboxStore::statements(config->outbox.schema),
                                 pg::LeaseStore::statements(config->outbox.schema),
                                 pg::WatchStore::statements(config->outbox.schema)}) {
    for (const auto& [name, text] : statements) std::cout << "-- " << name << '\n' << text << ";\n\n";
  }
  return kExitOk;
}

}  // namespace outboxd::daemon
