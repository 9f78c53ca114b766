// `outboxd console`: the operators' web view, served until SIGTERM or SIGINT, sampling the backlog for its charts.
#include <pthread.h>
#include <sys/stat.h>
#include <signal.h>

#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "config/listen_address.hpp"
#include "config/secrets.hpp"
#include "config/security_warnings.hpp"
#include "daemon/commands.hpp"
#include "daemon/config_loading.hpp"
#include "daemon/console/console_app.hpp"
#include "http/http_service.hpp"

namespace outboxd::daemon {

namespace {

// The /metrics bounds, with POST for the forms, a small body for their
// fields, and longer for a page that waits on the database.
metrics::HttpLimits console_limits() {
  metrics::HttpLimits limits;
  limits.methods = {"GET", "HEAD", "POST"};
  limits.max_body = 4096;
  limits.deadline = std::chrono::seconds(15);
  return limits;
}

// Whether to serve on `listen` at all: loopback always; another address only
// with console.allow_plain_http, and then with a warning.
bool listen_allowed(const std::string& listen, const config::ConsoleConfig& console) {
  const auto address = config::parse_listen_address(listen);
  if (!address) {
    std::cerr << "console: listen address: " << address.error().message << '\n';
    return false;
  }
  if (config::is_loopback_host(address.value().host)) return true;
  if (!console.allow_plain_http) {
    std::cerr << "console: " << listen << " is not a loopback address and the console speaks plain HTTP: its token "
              << "and login cookie would cross the network readable. Listen on loopback behind a TLS proxy, or "
              << "set console.allow_plain_http: true to serve it anyway\n";
    return false;
  }
  spdlog::warn("console: serving {} over plain HTTP (console.allow_plain_http): the token and login cookies "
               "cross the network readable",
               listen);
  return true;
}

std::optional<std::string> read_token(const config::ConsoleConfig& console) {
  if (console.token_file.empty()) {
    std::cerr << "console: set console.token_file to a file holding the login token (at least "
              << console::kMinTokenCharacters << " characters)\n";
    return std::nullopt;
  }
  auto token = config::read_secret_file(console.token_file, console.token_file);
  if (!token) {
    std::cerr << "console: console.token_file: " << token.error().message << '\n';
    return std::nullopt;
  }
  // A short token is one a person might guess or type from memory.
  if (auto problem = console::token_problem(token.value())) {
    std::cerr << "console: console.token_file " << console.token_file << ": " << *problem << '\n';
    return std::nullopt;
  }
  struct stat status {};
  if (::stat(console.token_file.c_str(), &status) == 0) {
    if (auto warning = config::secret_file_warning("console.token_file", console.token_file, status.st_mode)) {
      spdlog::warn("{}", *warning);
    }
  }
  return std::move(token).value();
}

// SIGTERM, SIGINT and SIGHUP blocked in every thread from here on, taken by sigwait.
sigset_t block_signals() {
  sigset_t taken;
  sigemptyset(&taken);
  sigaddset(&taken, SIGTERM);
  sigaddset(&taken, SIGINT);
  sigaddset(&taken, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &taken, nullptr);
  return taken;
}

// Until SIGTERM or SIGINT; a SIGHUP (a reload sent to every unit process) changes nothing.
int wait_for_stop(const sigset_t& taken) {
  for (;;) {
    int signal = 0;
    if (sigwait(&taken, &signal) != 0) continue;
    if (signal != SIGHUP) return signal;
    spdlog::info("console: SIGHUP ignored: the console reads its configuration at start only");
  }
}

// What the console serves: the one outbox of the file or of --outbox; or,
// with many outboxes and no --outbox, every one (the catalog's as read now).
struct Served {
  std::optional<config::Config> config;
  std::vector<config::OutboxEntry> outboxes;  // empty: config's one outbox
  int exit_code = kExitOk;
};

Served served(const ConfigChoice& choice) {
  auto config = load_config_or_report(choice.path);
  if (!config) return {std::nullopt, {}, kExitConfig};
  if (!config->many_outboxes() || !choice.outbox.empty()) {
    auto one = choose_outbox(*config, choice, "console");
    if (!one.config) return {std::nullopt, {}, one.exit_code};
    if (!init_logging(*one.config)) return {std::nullopt, {}, kExitConfig};
    return {std::move(one.config), {}, kExitOk};
  }
  if (!init_logging(*config)) return {std::nullopt, {}, kExitConfig};
  auto outboxes = all_outboxes(*config, "console").entries;
  if (outboxes.empty()) {
    std::cerr << "console: " << choice.path << " lists no outbox and its catalog gave none\n";
    return {std::nullopt, {}, kExitFailure};
  }
  spdlog::info("console: serving {} outboxes", outboxes.size());
  return {std::move(config), std::move(outboxes), kExitOk};
}

}  // namespace

int cmd_console(const ConfigChoice& choice, const std::string& listen_option) {
  auto chosen = served(choice);
  auto& config = chosen.config;
  if (!config) return chosen.exit_code;
  const std::string listen = listen_option.empty() ? config->console.listen : listen_option;
  if (!listen_allowed(listen, config->console)) return kExitConfig;
  auto token = read_token(config->console);
  if (!token) return kExitConfig;
  // One outbox's database is connected now, so that a wrong one is said at
  // once; many outboxes' databases when first needed, one down showing in the list.
  std::optional<pg::Connection> connection;
  if (chosen.outboxes.empty()) {
    connection = connect_for_command(*config, "console");
    if (!connection) return kExitFailure;
  }

  const sigset_t signals = block_signals();
  const auto interval = config->console.sample_interval;
  ConsoleApp app(std::move(*config), chosen.outboxes, std::move(*token), std::move(connection));
  metrics::HttpService service(console_limits());
  app.add_routes(service.routes());
  if (const auto started = service.start("console.listen", listen); !started) {
    std::cerr << "console: " << started.error().message << '\n';
    return kExitFailure;
  }
  spdlog::info("console: serving on port {} ({})", service.port(), listen);

  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread sampler([&] {
    std::unique_lock lock(mutex);
    while (!stopping) {
      lock.unlock();
      app.sample();
      lock.lock();
      wake.wait_for(lock, interval, [&] { return stopping; });
    }
  });
  spdlog::info("console: stopping on signal {}", wait_for_stop(signals));
  app.stop_sampling();
  {
    std::lock_guard lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  sampler.join();
  service.stop();
  return kExitOk;
}

}  // namespace outboxd::daemon
