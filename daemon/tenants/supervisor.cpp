// Supervisor: start, one turn (signals, reports, listeners, the plan, the sleep), finish.
#include "daemon/tenants/supervisor.hpp"

#include <poll.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <cstring>

#include "daemon/commands.hpp"
#include "daemon/run/database_connection.hpp"
#include "pg/watch_store.hpp"

namespace outboxd::daemon::tenants {

namespace {

constexpr std::chrono::milliseconds kLongestSleep{1000};

}  // namespace

dispatch::TenantPolicy tenant_policy(const config::Config& config, std::size_t workers) {
  dispatch::TenantPolicy policy;
  policy.workers = workers;
  policy.idle_check = config.tenants.idle_check_interval;
  policy.listened_check = config.dispatch.poll_interval;
  policy.retry = {config.database.reconnect_min, config.database.reconnect_max, 2.0, 0.2};
  policy.lease_ttl = config.leases.lease_ttl;
  return policy;
}

Budget budget_of(int max_connections) {
  const auto total = static_cast<std::size_t>(std::max(max_connections, 1));
  Budget budget;
  budget.listeners = total / 4;
  budget.workers = total - budget.listeners;
  return budget;
}

Supervisor::Supervisor(config::Config config, std::string instance_id, SignalWatcher& signals)
    : config_(std::move(config)),
      instance_id_(std::move(instance_id)),
      signals_(signals),
      random_(static_cast<std::uint64_t>(clock_.now().time_since_epoch().count())),
      publisher_random_(static_cast<std::uint64_t>(clock_.now().time_since_epoch().count()) ^ 0x9E3779B97F4A7C15ULL),
      budget_(budget_of(config_.tenants.max_connections)),
      publisher_(config_.broker, config_.broker.container_id.empty() ? instance_id_ : config_.broker.container_id,
                 router_, clock_, publisher_random_),
      context_{instance_id_, instance_id_ + " (watching)", publisher_, router_, mailbox_, contended_},
      schedule_(tenant_policy(config_, budget_.workers), clock_, random_),
      states_(registry_.gauge_set("outboxd_outboxes", "Outboxes this daemon serves, by state")),
      outbox_states_(registry_.gauge_set("outboxd_outbox_state",
                                         "1 for each outbox's state; the 50 outboxes owing most only")),
      outbox_dispatched_(registry_.gauge_set("outboxd_outbox_dispatched_rows",
                                             "Rows each outbox's run loops dispatched since start; the 50 outboxes "
                                             "owing most only")),
      outbox_backlog_(registry_.gauge_set("outboxd_outbox_backlog_rows",
                                          "Rows waiting in each outbox as last seen; the 50 outboxes owing most "
                                          "only")),
      connections_(registry_.gauge("outboxd_outbox_connections",
                                   "PostgreSQL connections held now: listeners and workers' jobs")),
      service_(clock_, true) {}

Supervisor::~Supervisor() = default;

int Supervisor::run() {
  if (auto failed = start()) return *failed;
  while (!stopping_ || jobs_ > 0) {
    turn();
    if (stopping_ && clock_.now() >= stop_by_ && jobs_ > 0) {
      spdlog::warn("{} jobs still running at the shutdown deadline; leaving them", jobs_);
      break;
    }
  }
  finish();
  return 0;
}

std::optional<int> Supervisor::start() {
  spdlog::info("outboxd {} starting as instance {}: many outboxes, {} connections ({} listeners, {} workers)",
               OUTBOXD_VERSION, instance_id_, config_.tenants.max_connections, budget_.listeners,
               budget_.workers);
  if (!config_.http.listen.empty()) {
    const auto stale_after = std::chrono::seconds(30);
    http_ = std::make_unique<metrics::HttpServer>(registry_, health_, stale_after);
    if (auto listening = http_->start(config_.http.listen); !listening) {
      spdlog::critical("{}", listening.error().message);
      return 1;
    }
    spdlog::info("serving /metrics, /healthz and /readyz on {}", config_.http.listen);
  }
  if (auto started = publisher_.start(); !started) {
    spdlog::critical("cannot start the AMQP client: {}", started.error().message);
    return 1;
  }
  if (publisher_.plain_over_cleartext()) {
    spdlog::warn("broker: SASL PLAIN sends the password in clear text over amqp:// to a non-loopback host; "
                 "use amqps:// (or set broker.allow_insecure_plain to silence this)");
  }
  workers_ = std::make_unique<WorkerPool>(budget_.workers);
  adopt(config_.outboxes);
  if (!config_.tenants.catalog.query.empty()) catalog_due_ = clock_.now();
  next_stats_ = clock_.now() + config_.dispatch.stats_interval;
  return std::nullopt;
}

void Supervisor::turn() {
  for (const int signal : signals_.take()) {
    if (signal == SIGHUP && !stopping_) {
      reload();
    } else if (signal != SIGHUP && !stopping_) {
      spdlog::info("{}: stopping; waiting up to {} ms for the outboxes served now", strsignal(signal),
                   config_.dispatch.shutdown_timeout.count());
      stopping_ = true;
      stop_by_ = clock_.now() + config_.dispatch.shutdown_timeout + std::chrono::seconds(5);
      health_.stopping = true;
      service_.stopping();
      for (auto& outbox : outboxes_) {
        if (outbox.control) {
          outbox.control->shutdown = true;
          outbox.control->wake.notify();
        }
      }
    }
  }
  take_reports();
  drain_listeners();
  for (OutboxId id = 0; id < outboxes_.size(); ++id) {
    if (outboxes_[id].control && outboxes_[id].control->releasing) schedule_.on_releasing(id);
  }
  if (!stopping_) {
    read_catalog_when_due();
    open_listeners();
    run_plan();
  }
  report();
  log_stats();
  sleep();
}

void Supervisor::finish() {
  workers_->join();
  unwatch_all();
  publisher_.stop();
  if (http_) http_->stop();
  std::uint64_t dispatched = 0, parked = 0;
  for (const auto& outbox : outboxes_) {
    dispatched += outbox.totals.dispatched;
    parked += outbox.totals.parked;
  }
  spdlog::info("outboxd stopped: dispatched {}, parked {}", dispatched, parked);
}

// A watch row left behind would make writers NOTIFY no one until a balancer
// forgets it, or forever if no daemon serves the outbox again: each goes,
// one connection per database, as the daemon stops.
void Supervisor::unwatch_all() {
  for (const auto& database : databases_) {
    std::optional<pg::Connection> connection;
    for (const OutboxId id : database.outboxes) {
      const Outbox& outbox = outboxes_[id];
      if (!outbox.watched) continue;
      if (!connection) {
        auto opened = open_database(outbox.config.database, "outboxd " + instance_id_ + " watch");
        if (!opened) {
          spdlog::warn("outbox {}: could not remove its wake-up registration: {}", outbox.entry.name,
                       opened.error().message);
          break;
        }
        connection.emplace(std::move(opened).value());
      }
      if (auto gone = pg::WatchStore(*connection, outbox.entry.outbox.schema).unwatch(context_.watcher_id); !gone) {
        spdlog::warn("outbox {}: could not remove its wake-up registration: {}", outbox.entry.name,
                     gone.error().message);
      }
    }
  }
}

std::size_t Supervisor::free_workers() const { return jobs_ >= budget_.workers ? 0 : budget_.workers - jobs_; }

// Sleeps on the signals, the workers' reports and every listener, until the
// schedule's next deadline.
void Supervisor::sleep() {
  std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}, {mailbox_.fd(), POLLIN, 0}};
  for (auto& database : databases_) {
    if (database.listener) fds.push_back({database.listener->socket(), POLLIN, 0});
  }
  const auto now = clock_.now();
  auto until = now + kLongestSleep;
  if (const auto next = schedule_.next_deadline(); next && *next < until) until = *next;
  if (const auto ping = service_.next_ping(); ping && *ping < until) until = *ping;
  if (catalog_due_ && *catalog_due_ < until) until = *catalog_due_;
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(std::max(until - now, core::Duration::zero()));
  if (poll(fds.data(), fds.size(), static_cast<int>(wait.count())) > 0 && (fds[1].revents & POLLIN) != 0) {
    mailbox_.clear();
  }
}

}  // namespace outboxd::daemon::tenants
