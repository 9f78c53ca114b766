// The /metrics, /healthz and /readyz endpoints: one thread, one poll loop, every request bounded.
#include "metrics/http_server.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "metrics/http_request.hpp"
#include "config/listen_address.hpp"

namespace outboxd::metrics {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kMetricsContentType = "text/plain; version=0.0.4";
constexpr int kListenBacklog = 64;
constexpr std::chrono::milliseconds kAcceptPause{100};

std::string errno_text(int error) { return std::system_category().message(error); }

Response verdict_response(const Verdict& verdict) {
  return {verdict.ok ? 200 : 503, "text/plain; charset=utf-8", verdict.text};
}

// One accepted socket, from its first byte to the end of its response.
struct Connection {
  int fd = -1;
  Clock::time_point deadline;
  std::string received;  // the head so far; at most kMaxRequestHead plus one read
  std::string response;  // set once the head is complete
  std::size_t sent = 0;
};

void close_connection(Connection& connection) {
  // Half-close first so that a client still sending its body sees the
  // response before the reset its unread bytes cause.
  ::shutdown(connection.fd, SHUT_WR);
  ::close(connection.fd);
  connection.fd = -1;
}

}  // namespace

struct HttpServer::Impl {
  Impl(const Registry& r, const Health& h, std::chrono::seconds s) : registry(r), health(h), stale_after(s) {}
  ~Impl() {
    if (listen_fd >= 0) ::close(listen_fd);
    if (wake_fd >= 0) ::close(wake_fd);
  }

  core::Result<int> bind_and_listen(const config::ListenAddress& address);
  void run();
  int poll_timeout_ms(bool accepting) const;
  void accept_all();
  void service(Connection& connection, short revents);
  void read_head(Connection& connection);
  void write_response(Connection& connection);
  Response answer(const core::Result<RequestHead>& request) const;

  const Registry& registry;
  const Health& health;
  const std::chrono::seconds stale_after;

  int listen_fd = -1;
  int wake_fd = -1;  // an eventfd: stop() writes, the loop wakes and returns
  std::thread thread;
  std::atomic<int> port{0};
  bool started = false;  // by a successful start(); owner thread only
  std::vector<Connection> connections;  // the loop thread's alone, oldest first
  Clock::time_point accept_paused_until;  // the loop thread's alone
};

// Every address the host resolves to is tried in turn, as a dual-stack
// socket for IPv6; the reason the last one failed is what the operator reads,
// e.g. "Address already in use".
core::Result<int> HttpServer::Impl::bind_and_listen(const config::ListenAddress& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(address.port);
  if (const int rc = ::getaddrinfo(address.host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return core::fatal_error(::gai_strerror(rc));
  }
  std::string reason = "cannot bind";
  for (const addrinfo* ai = found; ai != nullptr && listen_fd < 0; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      reason = errno_text(errno);
      continue;
    }
    // SO_REUSEADDR allows a quick restart past TIME_WAIT; SO_REUSEPORT is
    // left off so that a second daemon cannot take half the scrapes.
    const int yes = 1;
    const int no = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (ai->ai_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, kListenBacklog) == 0) {
      listen_fd = fd;
    } else {
      reason = errno_text(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (listen_fd < 0) return core::fatal_error(reason);
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &length);
  return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

// Reading and writing never block, so a slow client holds a slot in the
// poll set, not a thread: /healthz is answered while any number of them
// dawdle, and each is dropped at its deadline.
void HttpServer::Impl::run() {
  std::vector<pollfd> polled;
  for (;;) {
    const bool accepting = Clock::now() >= accept_paused_until;
    polled.assign({{wake_fd, POLLIN, 0}, {listen_fd, static_cast<short>(accepting ? POLLIN : 0), 0}});
    for (const Connection& c : connections) {
      polled.push_back({c.fd, static_cast<short>(c.response.empty() ? POLLIN : POLLOUT), 0});
    }
    if (::poll(polled.data(), polled.size(), poll_timeout_ms(accepting)) < 0 && errno != EINTR) return;
    if (polled[0].revents != 0) return;

    const auto now = Clock::now();
    for (std::size_t i = 0; i < connections.size(); ++i) {
      Connection& connection = connections[i];
      if (now >= connection.deadline) {
        close_connection(connection);
      } else if (polled[i + 2].revents != 0) {
        service(connection, polled[i + 2].revents);
      }
    }
    std::erase_if(connections, [](const Connection& c) { return c.fd < 0; });
    if (polled[1].revents != 0) accept_all();
  }
}

// Until the oldest connection's deadline, or the end of a pause in accepting.
int HttpServer::Impl::poll_timeout_ms(bool accepting) const {
  std::optional<Clock::time_point> wake;
  if (!connections.empty()) wake = connections.front().deadline;
  if (!accepting && (!wake || accept_paused_until < *wake)) wake = accept_paused_until;
  if (!wake) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*wake - Clock::now()).count();
  return static_cast<int>(std::max<std::int64_t>(0, left));
}

void HttpServer::Impl::accept_all() {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors, the pending connection stays queued and the
      // socket readable: without a pause the loop would spin on it.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_paused_until = Clock::now() + kAcceptPause;
      }
      return;  // EAGAIN: none left
    }
    // At the cap the oldest connection, the likeliest to be stuck, makes room.
    if (connections.size() >= kMaxHttpConnections) {
      close_connection(connections.front());
      connections.erase(connections.begin());
    }
    connections.push_back({fd, Clock::now() + kHttpRequestDeadline, {}, {}, 0});
  }
}

void HttpServer::Impl::service(Connection& connection, short revents) {
  if (connection.response.empty() && (revents & (POLLIN | POLLHUP | POLLERR)) != 0) read_head(connection);
  if (connection.fd >= 0 && !connection.response.empty()) write_response(connection);
}

void HttpServer::Impl::read_head(Connection& connection) {
  char buffer[4096];
  const ssize_t n = ::recv(connection.fd, buffer, sizeof buffer, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    close_connection(connection);
    return;
  }
  connection.received.append(buffer, static_cast<std::size_t>(n));
  const std::size_t end = request_head_end(connection.received);
  if (end != std::string::npos && end <= kMaxRequestHead) {
    const auto request = parse_request_head(std::string_view(connection.received).substr(0, end));
    const bool with_body = !request.ok() || request.value().method != "HEAD";
    connection.response = serialize(answer(request), with_body);
  } else if (connection.received.size() > kMaxRequestHead) {
    connection.response = serialize({431, "text/plain; charset=utf-8", "request head too large"}, true);
  }
}

void HttpServer::Impl::write_response(Connection& connection) {
  while (connection.sent < connection.response.size()) {
    const ssize_t n = ::send(connection.fd, connection.response.data() + connection.sent,
                             connection.response.size() - connection.sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) break;
    connection.sent += static_cast<std::size_t>(n);
  }
  close_connection(connection);
}

Response HttpServer::Impl::answer(const core::Result<RequestHead>& request) const {
  if (auto refused = refusal(request)) return *std::move(refused);
  const std::string& path = request.value().path;
  if (path == "/metrics") return {200, kMetricsContentType, registry.render()};
  if (path == "/healthz") return verdict_response(liveness(health, Clock::now(), stale_after));
  if (path == "/readyz") return verdict_response(readiness(health));
  return {404, "text/plain; charset=utf-8", "not found"};
}

HttpServer::HttpServer(const Registry& registry, const Health& health, std::chrono::seconds stale_after)
    : impl_(std::make_unique<Impl>(registry, health, stale_after)) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->port.load(); }

core::Status HttpServer::start(const std::string& listen) {
  if (impl_->started) return core::fatal_error("http.listen " + listen + ": server already started");
  auto address = config::parse_listen_address(listen);
  if (!address.ok()) return core::fatal_error("http.listen: " + address.error().message);
  const auto bound = impl_->bind_and_listen(address.value());
  if (!bound.ok()) return core::fatal_error("http.listen " + listen + ": " + bound.error().message);

  impl_->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl_->wake_fd < 0) return core::fatal_error("http.listen " + listen + ": eventfd: " + errno_text(errno));
  try {
    impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
  } catch (const std::exception& e) {
    // The bound socket stays open until exit, which a fatal error brings soon.
    return core::fatal_error("http.listen " + listen + ": cannot start the server thread: " + e.what());
  }
  impl_->port = bound.value();
  impl_->started = true;
  return {};
}

void HttpServer::stop() {
  if (!impl_->thread.joinable()) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(impl_->wake_fd, &one, sizeof one);
  impl_->thread.join();
  for (Connection& connection : impl_->connections) close_connection(connection);
  impl_->connections.clear();
  ::close(impl_->listen_fd);
  impl_->listen_fd = -1;
}

}  // namespace outboxd::metrics
