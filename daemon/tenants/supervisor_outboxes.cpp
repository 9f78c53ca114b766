// Supervisor: the outboxes it knows and their databases, the listeners' places, a reload.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <set>

#include "config/loader.hpp"
#include "config/outboxes.hpp"
#include "config/reload.hpp"
#include "daemon/config_loading.hpp"
#include "daemon/tenants/supervisor.hpp"

namespace outboxd::daemon::tenants {

// The outboxes of the configuration now: new ones are checked, gone ones let
// go (a serve job first finishes what it sent), changed ones both.
void Supervisor::adopt(const std::vector<config::OutboxEntry>& entries) {
  std::set<std::string> wanted;
  for (const auto& entry : entries) wanted.insert(entry.name);
  for (OutboxId id = 0; id < outboxes_.size(); ++id) {
    const auto& outbox = outboxes_[id];
    if (!outbox.present) continue;
    const auto same = std::find(entries.begin(), entries.end(), outbox.entry);
    if (same == entries.end()) remove_outbox(id);
  }
  for (const auto& entry : entries) {
    if (!by_name_.contains(entry.name)) add_outbox(entry);
  }
  assign_listeners();
}

void Supervisor::add_outbox(const config::OutboxEntry& entry) {
  const OutboxId id = outboxes_.size();
  Outbox outbox;
  outbox.present = true;
  outbox.entry = entry;
  outbox.config = config::for_outbox(config_, entry);
  outbox.database = database_for(outbox.config);
  databases_[outbox.database].outboxes.push_back(id);
  outboxes_.push_back(std::move(outbox));
  by_name_[entry.name] = id;
  schedule_.add(id, outboxes_[id].database);
  spdlog::info("outbox {}: schema {} added", entry.name, entry.outbox.schema);
}

void Supervisor::remove_outbox(OutboxId id) {
  Outbox& outbox = outboxes_[id];
  spdlog::info("outbox {}: removed from the configuration; letting it go", outbox.entry.name);
  if (schedule_.remove(id) && outbox.control) {
    outbox.control->shutdown = true;
    outbox.control->wake.notify();
  }
  auto& database = databases_[outbox.database];
  std::erase(database.outboxes, id);
  std::erase_if(database.channels, [id](const auto& channel) { return channel.second == id; });
  by_name_.erase(outbox.entry.name);
  outbox.present = false;
}

// Outboxes of one url share their database's listener and checks.
std::size_t Supervisor::database_for(const config::Config& single) {
  const std::string& key = single.database.url;
  if (const auto found = database_index_.find(key); found != database_index_.end()) return found->second;
  Database database;
  database.key = key;
  database.config = single.database;
  // Behind a transaction pooler a LISTEN goes to PostgreSQL itself, or nowhere.
  if (single.database.pooler == config::Pooler::transaction) {
    database.may_listen = !single.database.listen_url.empty();
    database.config.url = single.database.listen_url;
    database.config.target = single.database.listen_target;
    database.config.pooler = config::Pooler::none;
  }
  databases_.push_back(std::move(database));
  database_index_[key] = databases_.size() - 1;
  return databases_.size() - 1;
}

// The listeners go to the databases with the most outboxes (a schema per
// tenant: one listener hears them all); the others are checked. Among
// databases of as many outboxes, each daemon picks its own: a NOTIFY wakes
// every daemon listening, and daemons that all listened to the same ones
// would all start serving each first row there at once.
void Supervisor::assign_listeners() {
  std::vector<std::pair<std::size_t, std::size_t>> ranked;  // {this daemon's draw, database}
  for (std::size_t i = 0; i < databases_.size(); ++i) {
    if (!databases_[i].outboxes.empty() && databases_[i].may_listen) {
      ranked.emplace_back(std::hash<std::string>{}(instance_id_ + '\n' + databases_[i].key), i);
    }
  }
  std::sort(ranked.begin(), ranked.end(), [this](const auto& a, const auto& b) {
    const std::size_t size_a = databases_[a.second].outboxes.size();
    const std::size_t size_b = databases_[b.second].outboxes.size();
    return size_a != size_b ? size_a > size_b : a < b;
  });
  for (auto& database : databases_) database.listening_wanted = false;
  for (std::size_t i = 0; i < ranked.size() && i < budget_.listeners; ++i) {
    databases_[ranked[i].second].listening_wanted = true;
  }
  for (auto& database : databases_) {
    const bool channels_complete = database.channels.size() == database.outboxes.size();
    if (database.listener && (!database.listening_wanted || !channels_complete)) {
      drop_listener(database, database.listening_wanted ? "its outboxes changed" : "");
    }
  }
}

// As the single-outbox daemon reloads, and the outbox list too.
void Supervisor::reload() {
  spdlog::info("SIGHUP: reloading {}", config_.source);
  auto loaded = config::load_file(config_.source);
  if (!loaded) {
    for (const auto& diagnostic : loaded.diagnostics()) spdlog::error("{}", diagnostic.to_string());
    spdlog::error("reload: {} has errors; the running configuration stays", config_.source);
    return;
  }
  auto plan = config::plan_reload(config_, loaded.value());
  const bool log_changed = std::any_of(plan.applied.begin(), plan.applied.end(),
                                       [](const std::string& key) { return key.starts_with("log."); });
  config_ = std::move(plan.config);
  if (log_changed) init_logging(config_);
  schedule_.set_policy(tenant_policy(config_, budget_.workers));
  // The sections every outbox shares (dispatch:, destinations:, ...) reach
  // each outbox's next run; a run in progress keeps what it started with.
  for (auto& outbox : outboxes_) {
    if (outbox.present) outbox.config = config::for_outbox(config_, outbox.entry);
  }
  if (config_.tenants.catalog.query.empty()) {
    catalog_due_.reset();
    adopt(config_.outboxes);
  } else {
    catalog_due_ = clock_.now();  // the list and the catalog are adopted together once it is read
  }
  if (!plan.applied.empty()) spdlog::info("reload: applied {}", fmt::join(plan.applied, ", "));
  if (!plan.needs_restart.empty()) {
    spdlog::warn("reload: changed but kept as running until a restart: {}", fmt::join(plan.needs_restart, ", "));
  }
}

}  // namespace outboxd::daemon::tenants
