// `outboxd healthcheck`: asks the running daemon's /healthz, for container HEALTHCHECKs without curl.
#include <chrono>
#include <iostream>

#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "http/health_probe.hpp"

namespace outboxd::daemon {

namespace {

// Below the Dockerfile's HEALTHCHECK --timeout, so that a hung daemon is
// reported by this command (with the reason) rather than killed by the runtime.
constexpr std::chrono::milliseconds kProbeTimeout{3000};

}  // namespace

// Exit 1 for every way of being unhealthy, a bad config included: container
// runtimes read 1 as unhealthy and reserve other codes.
int cmd_healthcheck(const std::string& path) {
  const auto config = load_config_or_report(path);
  if (!config) return kExitFailure;
  if (config->http.listen.empty()) {
    std::cerr << "healthcheck: http.listen is empty in " << path << ", so the daemon serves no /healthz\n";
    return kExitFailure;
  }
  if (auto healthy = metrics::probe_healthz(config->http.listen, kProbeTimeout); !healthy) {
    std::cerr << "healthcheck: " << healthy.error().message << '\n';
    return kExitFailure;
  }
  std::cout << "ok\n";
  return kExitOk;
}

}  // namespace outboxd::daemon
