// `outboxd console`'s request handling: who is asking, the outboxes served, their pages and actions as routes.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "console/login_book.hpp"
#include "console/outbox_list.hpp"
#include "console/pages.hpp"
#include "console/samples.hpp"
#include "core/result.hpp"
#include "daemon/console/database_pool.hpp"
#include "pg/connection.hpp"

namespace outboxd::daemon {

// Who a request comes from: a browser login (its login name and CSRF
// token) or a script with the bearer token (csrf empty).
struct Caller {
  std::string name;
  std::string csrf;
  bool bearer = false;
};

// One outbox the console serves: its config, where its pages are, what the sampler last read of it.
struct OutboxSite {
  config::Config config;  // a one-outbox config (config::for_outbox's with many)
  std::string name;       // empty: the console serves this one outbox alone
  std::string base;       // the path its pages are under: "" alone, "/o/<name>" of many
  std::mutex mutex;
  console::SampleHistory samples;  // under mutex
  console::OutboxReading reading;  // under mutex; shown in the list of outboxes
};

// Connections the console keeps open between uses, whatever the number of databases.
inline constexpr std::size_t kConsoleConnectionsKept = 4;

class ConsoleApp {
 public:
  // With `outboxes` empty, the one outbox of `config` at /, on `connection`
  // (made at start). Otherwise each of `outboxes` under /o/<name>/ and their
  // list at /; their databases are connected when first needed.
  ConsoleApp(config::Config config, const std::vector<config::OutboxEntry>& outboxes, std::string token,
             std::optional<pg::Connection> connection);

  // Every page, action and API route, each checking the caller first.
  void add_routes(httplib::Server& routes);
  // One backlog sample of every outbox served, one after the other, those of
  // a database together: for the charts and the list of outboxes. A failure
  // is logged and skipped.
  void sample();
  // The sample under way stops after the outbox it is reading.
  void stop_sampling() { stopping_ = true; }

 private:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&, const Caller&)>;
  using OutboxHandler = std::function<void(const httplib::Request&, httplib::Response&, const Caller&, OutboxSite&)>;

  std::optional<Caller> caller_of(const httplib::Request& request);
  // `handler` for a caller with the token or a login, else 401; for a
  // POST from a browser login also the right `csrf` field, else 403.
  httplib::Server::Handler guarded(Handler handler);
  // `handler` for the one outbox, or with many for the one the path names (else 404).
  Handler of_outbox(OutboxHandler handler);
  // A capture of the route's pattern, counted after the outbox's name when there are many.
  std::string part(const httplib::Request& request, std::size_t index) const;
  // Runs `read` on the connection of `site`'s database.
  template <class Read>
  auto with_database(OutboxSite& site, Read read) -> decltype(read(std::declval<pg::Connection&>())) {
    return databases_.with(site.config.database, std::move(read));
  }
  bool many() const { return sites_.size() > 1 || !sites_.front()->name.empty(); }
  // One sample of `site`, or why it could not be read (its reading says so too).
  std::optional<core::Error> sample(OutboxSite& site);
  // `site` could not be read at `at`: its reading's state and reason, logged when the state begins.
  void note_unread(OutboxSite& site, const core::Error& error, double at);

  void login(const httplib::Request& request, httplib::Response& response);
  void logout(const httplib::Request& request, httplib::Response& response, const Caller& caller);
  void outboxes(const httplib::Request& request, httplib::Response& response, const Caller& caller);
  void overview(const httplib::Request& request, httplib::Response& response, const Caller& caller,
                OutboxSite& site);
  void parked(const httplib::Request& request, httplib::Response& response, const Caller& caller, OutboxSite& site);
  void row(const httplib::Request& request, httplib::Response& response, const Caller& caller, OutboxSite& site);
  void session(const httplib::Request& request, httplib::Response& response, const Caller& caller,
               OutboxSite& site);
  void conversation(const httplib::Request& request, httplib::Response& response, const Caller& caller,
               OutboxSite& site);
  void search(const httplib::Request& request, httplib::Response& response, const Caller& caller,
               OutboxSite& site);
  void audit(const httplib::Request& request, httplib::Response& response, const Caller& caller, OutboxSite& site);
  void act(const httplib::Request& request, httplib::Response& response, const Caller& caller, OutboxSite& site);

  const config::Config config_;
  const std::string token_;
  console::LoginBook logins_;
  console::LoginThrottle throttle_;  // wrong tokens at login
  DatabasePool databases_;
  std::vector<std::unique_ptr<OutboxSite>> sites_;  // sampled in this order: those of a database together
  std::map<std::string, OutboxSite*, std::less<>> by_name_;
  std::atomic<bool> stopping_{false};
};

// What a page shows around its content, for `caller`, of `site`.
console::Frame frame_of(const Caller& caller, const OutboxSite& site);

// 32 bytes from the kernel's random source, as hex.
std::string random_token();

// JSON for /api/... and for an Accept of application/json; HTML otherwise.
bool wants_json(const httplib::Request& request);

// A field of the form a POST carries in its body
// (application/x-www-form-urlencoded); a query string does not count.
std::string form_field(const httplib::Request& request, std::string_view name);

// The steady clock in seconds: the time axis of the backlog samples.
double monotonic_seconds();

}  // namespace outboxd::daemon
