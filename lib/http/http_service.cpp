// cpp-httplib's server with bounds it lacks: a worker pool that caps connections, a deadline from accept, 405/413 unread.
#include "http/http_service.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include "config/listen_address.hpp"
#include "http/bounded_stream.hpp"

namespace outboxd::metrics {

namespace {

using Clock = std::chrono::steady_clock;

// What a worker knows of the connection it is about to serve: cpp-httplib
// hands the queue a closure around the socket, not the socket itself.
struct Ticket {
  Clock::time_point accepted_at;
  bool over_capacity = false;
};
thread_local Ticket t_ticket;

// Worker threads taking connections in accept order; the accept thread runs
// a connection beyond `max_connections` itself, which closes it at once.
class BoundedQueue final : public httplib::TaskQueue {
 public:
  BoundedQueue(std::size_t workers, std::size_t max_connections) : max_connections_(max_connections) {
    for (std::size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }

  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mutex_);
    if (waiting_.size() + busy_ >= max_connections_) {
      lock.unlock();
      t_ticket = {Clock::now(), true};
      fn();
      return;
    }
    waiting_.push_back({std::move(fn), Clock::now()});
    ready_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }

 private:
  struct Job {
    std::function<void()> serve;
    Clock::time_point accepted_at;
  };

  void work() {
    for (;;) {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
      if (waiting_.empty()) return;  // stopping, and every accepted connection served
      Job job = std::move(waiting_.front());
      waiting_.pop_front();
      ++busy_;
      lock.unlock();
      t_ticket = {job.accepted_at, false};
      job.serve();
      lock.lock();
      --busy_;
    }
  }

  const std::size_t max_connections_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Job> waiting_;
  std::size_t busy_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// One request per connection through a BoundedStream; process_request is
// cpp-httplib's own parsing, routing and response writing.
class BoundedServer final : public httplib::Server {
 public:
  explicit BoundedServer(const HttpLimits& limits) : limits_(limits) {}

 private:
  bool process_and_close_socket(int sock) override {
    bool served = false;
    if (!t_ticket.over_capacity) {
      BoundedStream stream(sock, t_ticket.accepted_at + limits_.deadline, limits_.max_head);
      bool closed = false;
      served = process_request(stream, true, closed, [](httplib::Request&) {});
    }
    // Half-close first so that a client still sending a refused body sees
    // the answer before the reset its unread bytes cause.
    ::shutdown(sock, SHUT_WR);
    ::close(sock);
    return served;
  }

  const HttpLimits& limits_;
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
  impl.server.new_task_queue = [&impl] { return new BoundedQueue(impl.limits.workers, impl.limits.max_connections); };
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
