// `outboxd run`: load the config, pick the instance id, wire the real adapters to the run loop or the supervisor.
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cstdint>
#include <string>

#include "config/watchdog.hpp"
#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "daemon/run/database_connection.hpp"
#include "daemon/run/event_loop.hpp"
#include "daemon/run/publisher_broker.hpp"
#include "daemon/run/run_loop.hpp"
#include "daemon/run/service_manager.hpp"
#include "daemon/tenants/supervisor.hpp"

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
  if (config->many_outboxes()) return tenants::Supervisor(std::move(*config), instance_id, signals).run();
  // The adapters keep the configuration they started with: a reload changes
  // none of the sections they read (the loop owns the running one).
  const config::Config started = *config;
  core::SteadyClock clock;
  const auto seed = static_cast<std::uint64_t>(clock.now().time_since_epoch().count());
  core::FastRandom random(seed);
  core::FastRandom publisher_random(seed ^ 0x9E3779B97F4A7C15ULL);  // the AMQP thread's own
  EventFd event_fd;
  SystemEvents events(signals, event_fd);
  DatabaseConnection database(started, instance_id, clock, random);
  const auto& broker_config = started.broker;
  PublisherBroker broker(broker_config, broker_config.container_id.empty() ? instance_id : broker_config.container_id,
                         event_fd, clock, publisher_random);
  RunLoop loop(std::move(*config), instance_id, {database, broker, events, clock, random});
  return loop.run();
}

}  // namespace outboxd::daemon
