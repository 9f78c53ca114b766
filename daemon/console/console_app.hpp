// `outboxd console`'s request handling: who is asking, the database behind one lock, the pages and actions as routes.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "console/login_book.hpp"
#include "console/samples.hpp"
#include "core/result.hpp"
#include "pg/connection.hpp"

namespace outboxd::daemon {

// Who a request comes from: a browser login (its login name and CSRF
// token) or a script with the bearer token (csrf empty).
struct Caller {
  std::string name;
  std::string csrf;
  bool bearer = false;
};

class ConsoleApp {
 public:
  ConsoleApp(config::Config config, pg::Connection connection, std::string token);

  // Every page, action and API route, each checking the caller first.
  void add_routes(httplib::Server& routes);
  // One backlog sample for the charts; a failure is logged and skipped.
  void sample();

 private:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&, const Caller&)>;

  std::optional<Caller> caller_of(const httplib::Request& request);
  // `handler` for a caller with the token or a login, else 401; for a
  // POST from a browser login also the right `csrf` field, else 403.
  httplib::Server::Handler guarded(Handler handler);
  // Runs `read` on the connection under the lock, reconnecting first when it is down.
  template <class Read>
  auto with_database(Read read) -> decltype(read(std::declval<pg::Connection&>())) {
    std::lock_guard lock(database_mutex_);
    // A reconnect that fails leaves the statement to fail and say why.
    if (!connection_.ok()) static_cast<void>(connection_.reset());
    return read(connection_);
  }

  void login(const httplib::Request& request, httplib::Response& response);
  void logout(const httplib::Request& request, httplib::Response& response, const Caller& caller);
  void overview(const httplib::Request& request, httplib::Response& response, const Caller& caller);
  void parked(const httplib::Request& request, httplib::Response& response, const Caller& caller);
  void row(const httplib::Request& request, httplib::Response& response, const Caller& caller);
  void session(const httplib::Request& request, httplib::Response& response, const Caller& caller);
  void audit(const httplib::Request& request, httplib::Response& response, const Caller& caller);
  void act(const httplib::Request& request, httplib::Response& response, const Caller& caller);

  const config::Config config_;
  const std::string token_;
  console::LoginBook logins_;
  console::LoginThrottle throttle_;  // wrong tokens at login
  std::mutex database_mutex_;
  pg::Connection connection_;  // under database_mutex_
  std::mutex samples_mutex_;
  console::SampleHistory samples_;  // under samples_mutex_
};

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
