// `outboxd version` and `outboxd check-config`.
#include <iostream>

#include "config/loader.hpp"
#include "core/safe_text.hpp"
#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "daemon/operator_text.hpp"

namespace outboxd::daemon {

int cmd_version() {
  std::cout << "outboxd " << OUTBOXD_VERSION << '\n';
  return kExitOk;
}

int cmd_check_config(const std::string& path) {
  const auto config = load_config_or_report(path);
  if (!config) return kExitConfig;
  for (const auto& warning : security_warnings(*config)) std::cerr << "warning: " << warning << '\n';
  std::cout << shown(config::summary(*config), core::kSafeTextMaxBytes) << '\n';
  // With many outboxes, the listed ones and the catalog: the catalog's own
  // outboxes are known only when it is read (outboxd status lists them).
  for (const auto& line : config::outboxes_summary(*config)) std::cout << "  " << shown(line, 1000) << '\n';
  return kExitOk;
}

}  // namespace outboxd::daemon
