// What a running daemon does with a configuration file read again on SIGHUP: which changes it applies, which wait for a restart.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace outboxd::config {

struct ReloadPlan {
  // The running configuration with every change that can be applied at run
  // time taken from the file; everything else as it runs now.
  Config config;
  // Dotted key paths ("dispatch.batch_size"), in the order of config/outboxd.yaml.
  // Never values: a key may hold a secret.
  std::vector<std::string> applied;        // changed, and applied by adopting `config`
  std::vector<std::string> needs_restart;  // changed, but only a restart applies them
};

// Compares the running configuration with one just loaded. Applied at run
// time: log level and format, the dispatch tunables the loop reads afresh
// (batch size, in-flight window, attempts, backoff, release retry, poll,
// shutdown and stats intervals) and retention. A password_file whose path is
// unchanged but whose contents changed counts as applied: the daemon reads the
// file again at every connect. Everything else (URLs, inline passwords, TLS,
// schema names, leases, http.listen, ...) needs a restart.
// With many outboxes, the list (outboxes), the catalog (tenants.catalog) and
// database: and outbox:, their defaults, are applied: the daemon builds its
// outboxes again from plan.config. Moving between one outbox and many, and
// the connection budget (tenants.max_connections and its timings), need a restart.
ReloadPlan plan_reload(const Config& running, const Config& loaded);

// The key paths plan_reload() compares: every row of the key table. A change
// inside a nested section is reported as the section (broker.tls).
std::vector<std::string> reload_key_paths();

}  // namespace outboxd::config
