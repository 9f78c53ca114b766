// The /metrics, /healthz and /readyz endpoints on cpp-httplib, kept behind a pimpl.
#include "metrics/http_server.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <exception>
#include <system_error>
#include <thread>

#include <httplib.h>

#include "metrics/listen_address.hpp"

namespace outboxd::metrics {

namespace {

constexpr const char* kMetricsContentType = "text/plain; version=0.0.4";
constexpr const char* kTextContentType = "text/plain; charset=utf-8";
constexpr std::size_t kWorkerThreads = 2;

void reply(httplib::Response& res, const Verdict& verdict) {
  res.status = verdict.ok ? 200 : 503;
  res.set_content(verdict.text, kTextContentType);
}

std::string errno_text(int error) { return std::system_category().message(error); }

// cpp-httplib reports only that binding failed. Repeating the bind the way it
// does (same addresses, SO_REUSEADDR, dual-stack IPv6) recovers the reason,
// e.g. "Address already in use", for the message an operator reads.
std::string bind_failure_reason(const ListenAddress& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(address.port);
  if (const int rc = ::getaddrinfo(address.host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return ::gai_strerror(rc);
  }
  std::string reason;
  for (const addrinfo* ai = found; ai != nullptr && reason.empty(); ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      reason = errno_text(errno);
      break;
    }
    const int yes = 1;
    const int no = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (ai->ai_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 1) != 0) reason = errno_text(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return reason.empty() ? "cannot bind" : reason;
}

}  // namespace

struct HttpServer::Impl {
  Impl(const Registry& r, const Health& h, std::chrono::seconds s) : registry(r), health(h), stale_after(s) {}

  void install_routes();

  const Registry& registry;
  const Health& health;
  const std::chrono::seconds stale_after;

  httplib::Server server;
  std::thread thread;                     // runs server.listen_after_bind()
  std::atomic<bool> listen_returned{false};
  std::atomic<int> port{0};
  bool started = false;                   // bound by start(); owner thread only
};

void HttpServer::Impl::install_routes() {
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry.render(), kMetricsContentType);
  });
  server.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    reply(res, liveness(health, std::chrono::steady_clock::now(), stale_after));
  });
  server.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    reply(res, readiness(health));
  });
  // Both error-handler overloads accept a lambda, hence the explicit type.
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request&, httplib::Response& res) {
        if (res.status != 404) return httplib::Server::HandlerResponse::Unhandled;
        res.set_content("not found", kTextContentType);
        return httplib::Server::HandlerResponse::Handled;
      }));
  // cpp-httplib sets SO_REUSEPORT by default, which lets a second daemon
  // bind the same port and silently take half the scrapes. SO_REUSEADDR
  // alone still allows a quick restart past TIME_WAIT.
  server.set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server.new_task_queue = [] { return new httplib::ThreadPool(kWorkerThreads); };
  // A scraper that keeps its connection open must not hold stop() for long.
  server.set_keep_alive_timeout(2);
  server.set_read_timeout(std::chrono::seconds(5));
  server.set_write_timeout(std::chrono::seconds(5));
}

HttpServer::HttpServer(const Registry& registry, const Health& health, std::chrono::seconds stale_after)
    : impl_(std::make_unique<Impl>(registry, health, stale_after)) {
  impl_->install_routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->port.load(); }

core::Status HttpServer::start(const std::string& listen) {
  if (impl_->started) return core::fatal_error("http.listen " + listen + ": server already started");
  auto address = parse_listen_address(listen);
  if (!address.ok()) return address.error();

  const ListenAddress& where = address.value();
  const int bound = where.port == 0 ? impl_->server.bind_to_any_port(where.host)
                                    : (impl_->server.bind_to_port(where.host, where.port) ? where.port : -1);
  if (bound <= 0) return core::fatal_error("http.listen " + listen + ": " + bind_failure_reason(where));
  impl_->started = true;

  try {
    impl_->thread = std::thread([impl = impl_.get()] {
      impl->server.listen_after_bind();
      impl->listen_returned = true;
    });
  } catch (const std::exception& e) {
    // The bound socket stays open until exit, which a fatal error brings soon.
    return core::fatal_error("http.listen " + listen + ": cannot start the server thread: " + e.what());
  }
  impl_->port = bound;
  // cpp-httplib's stop() is a no-op until the accept loop has marked itself
  // running; waiting here makes a stop() right after start() effective.
  while (!impl_->server.is_running() && !impl_->listen_returned) std::this_thread::yield();
  return {};
}

void HttpServer::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace outboxd::metrics
