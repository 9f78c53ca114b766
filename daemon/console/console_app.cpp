// `outboxd console`: authentication, CSRF, the outboxes served, and the routes of their pages and actions.
#include "daemon/console/console_app.hpp"

#include <sys/random.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "config/outboxes.hpp"
#include "config/url.hpp"
#include "console/pages.hpp"
#include "daemon/operator_text.hpp"
#include "pg/operator_views.hpp"
#include "pg/outbox_store.hpp"

namespace outboxd::daemon {

namespace {

using Clock = std::chrono::steady_clock;

// A browser login unused this long logs out.
constexpr std::chrono::hours kLoginIdleLimit{8};

void send_html(httplib::Response& response, int status, const std::string& html) {
  response.status = status;
  response.set_content(html, "text/html; charset=utf-8");
}

void send_json(httplib::Response& response, int status, const nlohmann::json& document) {
  response.status = status;
  response.set_content(document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace),
                       "application/json; charset=utf-8");
}

// A refusal or failure in the form the caller reads.
void refuse(const httplib::Request& request, httplib::Response& response, int status, const std::string& why,
            const console::Frame& frame = {}) {
  if (wants_json(request)) {
    send_json(response, status, {{"error", why}});
  } else if (status == 401) {
    send_html(response, status, console::login_page(why));
  } else {
    send_html(response, status, console::problem_page(frame, "Refused", why));
  }
  if (status == 401) response.set_header("WWW-Authenticate", "Bearer");
}

}  // namespace

bool wants_json(const httplib::Request& request) {
  // /api/... of the one outbox or of the list; /o/<name>/api/... of one of many.
  const std::string& path = request.path;
  const std::size_t after_name = path.rfind("/o/", 0) == 0 ? path.find('/', 3) : std::string::npos;
  const bool api = path.rfind("/api/", 0) == 0 ||
                   (after_name != std::string::npos && path.compare(after_name, 5, "/api/") == 0);
  return api ||
         request.get_header_value("Accept").find("application/json") != std::string::npos;
}

std::string form_field(const httplib::Request& request, std::string_view name) {
  if (request.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) != 0) return {};
  return console::form_value(request.body, name);
}

double monotonic_seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

std::string random_token() {
  unsigned char bytes[32];
  std::size_t filled = 0;
  while (filled < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + filled, sizeof bytes - filled, 0);
    if (n > 0) filled += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

ConsoleApp::ConsoleApp(config::Config config, const std::vector<config::OutboxEntry>& outboxes, std::string token,
                       std::optional<pg::Connection> connection)
    : config_(std::move(config)),
      token_(std::move(token)),
      logins_(random_token, std::chrono::duration_cast<std::chrono::seconds>(kLoginIdleLimit)),
      databases_(kConsoleConnectionsKept, "outboxd console") {
  if (outboxes.empty()) {
    sites_.push_back(std::make_unique<OutboxSite>());
    sites_.front()->config = config_;
    if (connection) databases_.adopt(config_.database, std::move(*connection));
    return;
  }
  // What every outbox's config shares, without the list: for_outbox() copies
  // its argument whole, and a thousand copies of a thousand entries take seconds.
  const config::Config shared = config::for_outbox(config_, outboxes.front());
  std::vector<const config::OutboxEntry*> order;
  for (const auto& entry : outboxes) order.push_back(&entry);
  // A database's outboxes one after the other: the sampler reads each database on one connection.
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->database.url < b->database.url;
  });
  for (const auto* entry : order) {
    auto site = std::make_unique<OutboxSite>();
    site->config = config::for_outbox(shared, *entry);
    site->name = entry->name;
    site->base = "/o/" + console::url_segment(entry->name);
    site->reading.name = entry->name;
    site->reading.database = config::describe(entry->database.target);
    site->reading.schema = entry->outbox.schema;
    by_name_[entry->name] = site.get();
    sites_.push_back(std::move(site));
  }
}

console::Frame frame_of(const Caller& caller, const OutboxSite& site) {
  return {caller.name, caller.csrf, site.name, site.base};
}

std::optional<Caller> ConsoleApp::caller_of(const httplib::Request& request) {
  if (request.has_header("Authorization")) {
    const auto token = console::bearer_token(request.get_header_value("Authorization"));
    if (!token || !console::same_secret(*token, token_)) return std::nullopt;
    return Caller{"bearer token", "", true};
  }
  const auto id = console::cookie_value(request.get_header_value("Cookie"), console::login_cookie_name(config_.console.behind_tls));
  if (!id) return std::nullopt;
  const auto login = logins_.find(*id, Clock::now());
  if (!login) return std::nullopt;
  return Caller{login->name, login->csrf, false};
}

httplib::Server::Handler ConsoleApp::guarded(Handler handler) {
  return [this, handler = std::move(handler)](const httplib::Request& request, httplib::Response& response) {
    const auto caller = caller_of(request);
    if (!caller) return refuse(request, response, 401, "log in with the console's token first");
    // A cookie rides along with any request a browser sends, so a POST made
    // by it must also prove it came from one of our pages.
    if (request.method == "POST" && !caller->bearer &&
        !console::same_secret(form_field(request, "csrf"), caller->csrf)) {
      return refuse(request, response, 403, "the form's CSRF token is missing or stale: reload the page",
                    {caller->name, caller->csrf});
    }
    handler(request, response, *caller);
  };
}

ConsoleApp::Handler ConsoleApp::of_outbox(OutboxHandler handler) {
  return [this, handler = std::move(handler)](const httplib::Request& request, httplib::Response& response,
                                              const Caller& caller) {
    if (!many()) return handler(request, response, caller, *sites_.front());
    const std::string name = request.matches[1];
    const auto found = by_name_.find(name);
    if (found == by_name_.end()) {
      return refuse(request, response, 404, "no outbox is named \"" + name + "\"", {caller.name, caller.csrf});
    }
    handler(request, response, caller, *found->second);
  };
}

std::string ConsoleApp::part(const httplib::Request& request, std::size_t index) const {
  return request.matches[index + (many() ? 1 : 0)];
}

void ConsoleApp::add_routes(httplib::Server& routes) {
  using Request = const httplib::Request&;
  using Page = void (ConsoleApp::*)(Request, httplib::Response&, const Caller&, OutboxSite&);
  const auto bind = [this](Page method) {
    return guarded(of_outbox([this, method](Request q, httplib::Response& r, const Caller& c, OutboxSite& site) {
      (this->*method)(q, r, c, site);
    }));
  };
  // One outbox's pages at /, many outboxes' under /o/<name>/ (a name is [A-Za-z0-9_.-]).
  const std::string at = many() ? "/o/([^/]+)" : "";
  routes.set_default_headers({{"Content-Security-Policy", console::kContentSecurityPolicy},
                              {"X-Content-Type-Options", "nosniff"},
                              {"X-Frame-Options", "DENY"},
                              {"Referrer-Policy", "no-referrer"},
                              {"Cache-Control", "no-store"}});
  routes.Get("/console.css", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(std::string(console::stylesheet()), "text/css; charset=utf-8");
  });
  routes.Get("/login", [](const httplib::Request&, httplib::Response& response) {
    send_html(response, 200, console::login_page(""));
  });
  routes.Post("/login", [this](const httplib::Request& q, httplib::Response& r) { login(q, r); });
  routes.Post("/logout", guarded([this](Request q, httplib::Response& r, const Caller& c) { logout(q, r, c); }));
  if (many()) {
    routes.Get(R"(/|/api/status)",
               guarded([this](Request q, httplib::Response& r, const Caller& c) { outboxes(q, r, c); }));
  }
  routes.Get(at + R"((?:/|/api/status))", bind(&ConsoleApp::overview));
  routes.Get(at + R"(/(api/)?parked)", bind(&ConsoleApp::parked));
  routes.Get(at + R"(/(api/)?rows/(.+))", bind(&ConsoleApp::row));
  routes.Get(at + R"(/(api/)?sessions/(.+))", bind(&ConsoleApp::session));
  routes.Get(at + R"(/(api/)?conversations/(.+))", bind(&ConsoleApp::conversation));
  routes.Get(at + R"(/search)", bind(&ConsoleApp::search));
  routes.Get(at + R"(/(api/)?audit)", bind(&ConsoleApp::audit));
  routes.Post(at + R"(/(api/)?(parked|sessions)/(.+)/(requeue|skip))", bind(&ConsoleApp::act));
}

void ConsoleApp::login(const httplib::Request& request, httplib::Response& response) {
  if (const auto wait = throttle_.wait(Clock::now()); wait.count() > 0) {
    response.set_header("Retry-After", std::to_string(wait.count()));
    return refuse(request, response, 429,
                  "too many wrong tokens in a row: try again in " + std::to_string(wait.count()) + " s");
  }
  const auto name = console::login_name(form_field(request, "name"));
  if (!console::same_secret(form_field(request, "token"), token_)) {
    throttle_.failed(Clock::now());
    spdlog::warn("console: a login with a wrong token from {}", request.remote_addr);
    return refuse(request, response, 401, "wrong token");
  }
  throttle_.succeeded();
  if (!name) return refuse(request, response, 401, "give your name: actions are recorded with it");
  const std::string id = logins_.open(*name, Clock::now());
  spdlog::info("console: {} logged in from {}", *name, request.remote_addr);
  response.set_header("Set-Cookie", console::login_cookie(id, config_.console.behind_tls));
  response.set_redirect("/", 303);
}

void ConsoleApp::logout(const httplib::Request& request, httplib::Response& response, const Caller&) {
  if (const auto id = console::cookie_value(request.get_header_value("Cookie"), console::login_cookie_name(config_.console.behind_tls))) {
    logins_.close(*id);
  }
  response.set_header("Set-Cookie", console::logout_cookie(config_.console.behind_tls));
  response.set_redirect("/login", 303);
}

}  // namespace outboxd::daemon
