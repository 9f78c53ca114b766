// `outboxd run`: load the config, pick the instance id, run the dispatcher.
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <string>

#include "config/watchdog.hpp"
#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "daemon/dispatcher.hpp"
#include "daemon/event_loop.hpp"
#include "daemon/service_manager.hpp"

namespace outboxd::daemon {

namespace {

// Host name + pid: unique among live processes and readable in the leases table.
std::string default_instance_id() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(host[0] ? host : "outboxd") + ":" + std::to_string(getpid());
}

}  // namespace

int cmd_run(const std::string& path) {
  // Block the shutdown signals before any thread exists, so every thread inherits the mask.
  SignalWatcher signals;
  auto config = load_config_or_report(path);
  if (!config) return kExitConfig;
  if (!init_logging(*config)) return kExitConfig;
  for (const auto& warning : security_warnings(*config)) spdlog::warn("{}", warning);
  if (const auto watchdog = ServiceManager::watchdog_interval()) {
    if (const auto conflict = config::watchdog_conflict(config->database, *watchdog)) {
      spdlog::critical("configuration: {}", *conflict);
      return kExitConfig;
    }
  }
  const std::string instance_id =
      config->leases.instance_id.empty() ? default_instance_id() : config->leases.instance_id;
  Dispatcher dispatcher(std::move(*config), instance_id, signals);
  return dispatcher.run();
}

}  // namespace outboxd::daemon
