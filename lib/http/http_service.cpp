// cpp-httplib's server with bounds it lacks: idle connections kept off the workers, a cap, a deadline from accept, 405/413 unread.
#include "http/http_service.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>

#include "config/listen_address.hpp"
#include "http/bounded_stream.hpp"

namespace outboxd::metrics {

namespace {

using Clock = std::chrono::steady_clock;

// Connections from accept to a worker. A connection waits in one poll() of
// the waiting room's thread until its client sends its first bytes (or
// hangs up), so that no worker waits on a client that sends nothing; only
// then does it queue for a worker, in that order. Past `max_connections` the
// connection idle longest is closed to make room: idle sockets, however
// many, cannot keep a probe of /healthz out. One idle past the deadline is
// closed too. cpp-httplib hands the queue a closure around each socket; the
// queue runs it on the accept thread, and the server's
// process_and_close_socket hands the socket to admit().
class ConnectionQueue final : public httplib::TaskQueue {
 public:
  static constexpr int kNoWakeTickMs = 50;
  using Serve = std::function<void(int sock, Clock::time_point accepted_at)>;

  ConnectionQueue(const HttpLimits& limits, Serve serve)
      : limits_(limits), serve_(std::move(serve)), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    watcher_ = std::thread([this] { watch(); });
    for (std::size_t i = 0; i < limits_.workers; ++i) workers_.emplace_back([this] { work(); });
  }
  ~ConnectionQueue() override {
    if (wake_ >= 0) ::close(wake_);
  }

  void enqueue(std::function<void()> fn) override { fn(); }

  void admit(int sock) {
    {
      std::lock_guard lock(mutex_);
      arrivals_.push_back({sock, Clock::now()});
    }
    wake();
  }

  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake();
    watcher_.join();
    ready_.notify_all();
    for (std::thread& thread : workers_) thread.join();
  }

 private:
  struct Connection {
    int sock;
    Clock::time_point accepted_at;
  };

  void wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto written = ::write(wake_, &one, sizeof one);
  }

  // The waiting room; `idle` is this thread's alone, so only it closes them.
  void watch() {
    std::vector<Connection> idle;
    std::vector<pollfd> polled;
    for (;;) {
      std::size_t queued = 0;
      {
        std::lock_guard lock(mutex_);
        if (stopping_) break;
        idle.insert(idle.end(), arrivals_.begin(), arrivals_.end());
        arrivals_.clear();
        queued = waiting_.size() + busy_;
      }
      // The oldest first: they are in accept order.
      std::size_t evicted = 0;
      while (evicted < idle.size() && idle.size() - evicted + queued > limits_.max_connections) {
        ::close(idle[evicted++].sock);
      }
      idle.erase(idle.begin(), idle.begin() + static_cast<std::ptrdiff_t>(evicted));
      polled.assign(1, pollfd{wake_, POLLIN, 0});
      // None idle: until an arrival or stopping; without the eventfd (the
      // process was out of descriptors at start), arrivals are looked for
      // every tick instead.
      int timeout_ms = wake_ < 0 ? kNoWakeTickMs : -1;
      const auto now = Clock::now();
      for (const Connection& c : idle) {
        polled.push_back({c.sock, POLLIN, 0});
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(c.accepted_at + limits_.deadline - now);
        const int left_ms = static_cast<int>(std::max<std::int64_t>(left.count(), 0));
        timeout_ms = timeout_ms < 0 ? left_ms : std::min(timeout_ms, left_ms);
      }
      ::poll(polled.data(), polled.size(), timeout_ms);
      std::uint64_t drained = 0;
      [[maybe_unused]] const auto read = ::read(wake_, &drained, sizeof drained);
      handle(idle, polled);
    }
    std::lock_guard lock(mutex_);
    for (const Connection& c : idle) ::close(c.sock);
    for (const Connection& c : arrivals_) ::close(c.sock);
    arrivals_.clear();
  }

  // After a poll: readable (or hung up) to the workers, past the deadline closed, the rest kept.
  void handle(std::vector<Connection>& idle, const std::vector<pollfd>& polled) {
    const auto now = Clock::now();
    std::size_t kept = 0;
    for (std::size_t i = 0; i < idle.size(); ++i) {
      if (polled[i + 1].revents != 0) {
        std::lock_guard lock(mutex_);
        waiting_.push_back(idle[i]);
        ready_.notify_one();
      } else if (now >= idle[i].accepted_at + limits_.deadline) {
        ::close(idle[i].sock);
      } else {
        idle[kept++] = idle[i];
      }
    }
    idle.resize(kept);
  }

  void work() {
    for (;;) {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
      if (waiting_.empty()) return;  // stopping, and every connection handed over served
      const Connection connection = waiting_.front();
      waiting_.pop_front();
      ++busy_;
      lock.unlock();
      serve_(connection.sock, connection.accepted_at);
      lock.lock();
      --busy_;
    }
  }

  const HttpLimits& limits_;
  const Serve serve_;
  const int wake_;  // an eventfd: arrivals and stopping end the waiting room's poll
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<Connection> arrivals_;  // accepted, not yet in the waiting room
  std::deque<Connection> waiting_;    // sent their first bytes: for the workers, in that order
  std::size_t busy_ = 0;
  bool stopping_ = false;
  std::thread watcher_;
  std::vector<std::thread> workers_;
};

// One request per connection through a BoundedStream; process_request is
// cpp-httplib's own parsing, routing and response writing.
class BoundedServer final : public httplib::Server {
 public:
  explicit BoundedServer(const HttpLimits& limits) : limits_(limits) {
    new_task_queue = [this] {
      queue_ = new ConnectionQueue(limits_, [this](int sock, Clock::time_point accepted_at) {
        serve(sock, accepted_at);
      });
      return queue_;
    };
  }

 private:
  // On the accept thread, for each connection accepted.
  bool process_and_close_socket(int sock) override {
    queue_->admit(sock);
    return true;
  }

  void serve(int sock, Clock::time_point accepted_at) {
    {
      // Gone before the close below: a client that has seen the close finds
      // nothing of its connection left running.
      BoundedStream stream(sock, accepted_at + limits_.deadline, limits_.max_head);
      bool closed = false;
      process_request(stream, true, closed, [](httplib::Request&) {});
    }
    // Half-close first so that a client still sending a refused body sees
    // the answer before the reset its unread bytes cause.
    ::shutdown(sock, SHUT_WR);
    ::close(sock);
  }

  const HttpLimits& limits_;
  ConnectionQueue* queue_ = nullptr;  // cpp-httplib owns it, for the time of listen_after_bind()
};

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : ", ") + word;
  return out;
}

// A Content-Length of digits no larger than `max_body` (an invalid one is refused too).
bool fits(const std::string& length, std::size_t max_body) {
  if (length.size() > 18 || !std::all_of(length.begin(), length.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  return std::stoull(length) <= max_body;
}

// Checked before cpp-httplib reads a body: it would otherwise read (and skip)
// any announced body, however large, before answering.
httplib::Server::HandlerResponse refuse_early(const HttpLimits& limits, const httplib::Request& request,
                                              httplib::Response& response) {
  if (std::find(limits.methods.begin(), limits.methods.end(), request.method) == limits.methods.end()) {
    response.status = 405;
    response.set_header("Allow", joined(limits.methods));
    return httplib::Server::HandlerResponse::Handled;
  }
  const std::string length = request.get_header_value("Content-Length");
  const bool chunked = request.has_header("Transfer-Encoding");
  if (chunked || (!length.empty() && length != "0" && !fits(length, limits.max_body))) {
    response.status = 413;
    return httplib::Server::HandlerResponse::Handled;
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

std::string reason_text(int status) {
  switch (status) {
    case 400: return "bad request";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 413: return "request body not accepted";
    case 431: return "request head too large";
    default: return "request refused";
  }
}

// SO_REUSEADDR for a quick restart past TIME_WAIT; SO_REUSEPORT (cpp-httplib's
// default) left off so that a second daemon cannot take half the requests.
void listen_socket_options(int fd) {
  const int yes = 1;
  const int no = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  int family = 0;
  socklen_t length = sizeof family;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &length) == 0 && family == AF_INET6) {
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
  }
}

// cpp-httplib's bind reports only failure; the reason is resolved here first
// and taken from errno after, e.g. "Address already in use".
core::Result<int> bind_port(httplib::Server& server, const config::ListenAddress& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(address.host.c_str(), nullptr, &hints, &found); rc != 0) {
    return core::fatal_error(::gai_strerror(rc));
  }
  ::freeaddrinfo(found);
  errno = 0;
  const int port = address.port == 0 ? server.bind_to_any_port(address.host)
                                     : (server.bind_to_port(address.host, address.port) ? address.port : -1);
  if (port >= 0) return port;
  return core::fatal_error(errno != 0 ? std::system_category().message(errno) : "cannot bind");
}

}  // namespace

struct HttpService::Impl {
  explicit Impl(HttpLimits l) : limits(std::move(l)), server(limits) {}

  const HttpLimits limits;
  BoundedServer server;
  std::thread thread;
  std::atomic<bool> accept_loop_ended{false};
  int port = 0;
};

HttpService::HttpService(HttpLimits limits) : impl_(std::make_unique<Impl>(std::move(limits))) {
  Impl& impl = *impl_;
  impl.server.set_socket_options(listen_socket_options);
  impl.server.set_keep_alive_max_count(1);
  impl.server.set_payload_max_length(impl.limits.max_body);
  impl.server.set_pre_routing_handler(
      [&impl](const httplib::Request& request, httplib::Response& response) {
        return refuse_early(impl.limits, request, response);
      });
  impl.server.set_error_handler(httplib::Server::Handler([](const httplib::Request&, httplib::Response& response) {
    if (response.body.empty()) response.set_content(reason_text(response.status), "text/plain; charset=utf-8");
  }));
}

HttpService::~HttpService() { stop(); }

httplib::Server& HttpService::routes() { return impl_->server; }

int HttpService::port() const { return impl_->port; }

core::Status HttpService::start(const std::string& key, const std::string& listen) {
  if (impl_->port != 0) return core::fatal_error(key + " " + listen + ": server already started");
  auto address = config::parse_listen_address(listen);
  if (!address.ok()) return core::fatal_error(key + ": " + address.error().message);
  const auto bound = bind_port(impl_->server, address.value());
  if (!bound.ok()) return core::fatal_error(key + " " + listen + ": " + bound.error().message);
  try {
    impl_->thread = std::thread([impl = impl_.get()] {
      impl->server.listen_after_bind();
      impl->accept_loop_ended = true;
    });
  } catch (const std::exception& e) {
    // The bound socket stays open until exit, which a fatal error brings soon.
    return core::fatal_error(key + " " + listen + ": cannot start the server thread: " + e.what());
  }
  // stop() is a no-op until the accept loop runs; waiting here makes it always stop.
  while (!impl_->server.is_running() && !impl_->accept_loop_ended) std::this_thread::yield();
  impl_->port = bound.value();
  return {};
}

void HttpService::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace outboxd::metrics
