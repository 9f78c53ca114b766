// `outboxd console`: authentication, CSRF, the database under one lock, and the routes of its pages and actions.
#include "daemon/console/console_app.hpp"

#include <sys/random.h>

#include <spdlog/spdlog.h>

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
  return request.path.rfind("/api/", 0) == 0 ||
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

ConsoleApp::ConsoleApp(config::Config config, pg::Connection connection, std::string token)
    : config_(std::move(config)),
      token_(std::move(token)),
      logins_(random_token, std::chrono::duration_cast<std::chrono::seconds>(kLoginIdleLimit)),
      connection_(std::move(connection)) {}

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

void ConsoleApp::add_routes(httplib::Server& routes) {
  const auto bind = [this](void (ConsoleApp::*method)(const httplib::Request&, httplib::Response&, const Caller&)) {
    return guarded([this, method](const httplib::Request& q, httplib::Response& r, const Caller& c) {
      (this->*method)(q, r, c);
    });
  };
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
  routes.Post("/logout", bind(&ConsoleApp::logout));
  routes.Get(R"(/|/api/status)", bind(&ConsoleApp::overview));
  routes.Get(R"(/(api/)?parked)", bind(&ConsoleApp::parked));
  routes.Get(R"(/(api/)?rows/(.+))", bind(&ConsoleApp::row));
  routes.Get(R"(/(api/)?sessions/(.+))", bind(&ConsoleApp::session));
  routes.Get(R"(/(api/)?audit)", bind(&ConsoleApp::audit));
  routes.Post(R"(/(api/)?(parked|sessions)/(.+)/(requeue|skip))", bind(&ConsoleApp::act));
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

void ConsoleApp::sample() {
  console::Sample sample;
  sample.at = monotonic_seconds();
  const auto status = with_database([&](pg::Connection& c) -> core::Status {
    pg::OutboxStore store(c, config_.outbox.schema);
    auto report = store.status();
    if (!report) return report.error();
    for (const auto& d : report.value().destinations) {
      sample.destinations[d.destination] = {d.due + d.retrying, d.scheduled, d.parked};
    }
    const auto& t = report.value().total;
    sample.total = {t.due + t.retrying, t.scheduled, t.parked};
    if (auto inserted = pg::OperatorViews(c, config_.outbox.schema).inserted_total()) sample.inserted = inserted.value();
    return {};
  });
  if (!status) {
    spdlog::warn("console: backlog sample skipped: {}", status.error().message);
    return;
  }
  std::lock_guard lock(samples_mutex_);
  samples_.add(std::move(sample));
}

}  // namespace outboxd::daemon
